#!/usr/bin/env python3
"""How fleetctl's feature-gate tables are derived from the source.

For each release tag of a kubernetes/kubernetes checkout, reads the files
that register gates into the components' one default feature gate
(pkg/features/kube_features.go, versioned_kube_features.go where it exists,
the generic apiserver's and component-base's feature files) and prints:

- removed: gates the tag before still declared and this tag no longer does
  (`src/checks/feature_gates/gate_table.rs`, "removed in" = this minor);
- locked: gates whose versioned spec at or below this minor says
  `LockToDefault: true` (`{Version: version.MustParse("1.33"), Default:
  true, PreRelease: featuregate.GA, LockToDefault: true}`), with the value
  (`src/checks/feature_gates/locked.rs`);
- added: gates this tag declares and the tag before did not (the "added
  in" minor of a gate a rollback target may not know yet).

Usage: feature_gates_from_source.py KUBERNETES_CHECKOUT v1.33.0 v1.34.0 ...
       feature_gates_from_source.py --fixtures tests/tools/feature_gates
       feature_gates_from_source.py --trim FILE > tests/tools/feature_gates/TAG/NAME.go
       feature_gates_from_source.py --self-test
Reads with `git show TAG:PATH`; changes nothing. Add the next minor by
running it with that minor's tag and the one before, and copy the lines
into the tables with the tag as their source.
"""

import glob
import os
import re
import subprocess
import sys

FILES = [
    "pkg/features/kube_features.go",
    "pkg/features/versioned_kube_features.go",
    "staging/src/k8s.io/apiserver/pkg/features/kube_features.go",
    "staging/src/k8s.io/apiextensions-apiserver/pkg/features/kube_features.go",
    # A gate moved here from pkg/features (CloudControllerManagerWebhook
    # in v1.32) is still known to kube-controller-manager: not removed.
    "staging/src/k8s.io/controller-manager/pkg/features/kube_features.go",
    "staging/src/k8s.io/component-base/features/features.go",
    "staging/src/k8s.io/component-base/metrics/features/kube_features.go",
]

DECL = re.compile(r'^\s*(\w+)\s+featuregate\.Feature\s*=\s*"(\w+)"', re.M)
# `Gate: {` opening a versioned list, then its `{Version: ...}` specs.
BLOCK = re.compile(r"^\s*(?:\w+\.)?(\w+):\s*\{\s*$", re.M)
SPEC = re.compile(
    r'\{\s*Version:\s*version\.MustParse\("1\.(\d+)"\)\s*,\s*Default:\s*(true|false)'
    r"[^}]*?LockToDefault:\s*true",
)
# Before v1.31 (and for most gates in v1.31) a spec is not versioned:
# `AppArmor: {Default: true, PreRelease: featuregate.GA, LockToDefault:
# true}, // remove in 1.33`: locked in the tag that says so, at least.
UNVERSIONED = re.compile(
    r"^\s*(?:\w+\.)?(\w+):\s*\{\s*Default:\s*(true|false)[^}\n]*?LockToDefault:\s*true",
    re.M,
)


def show(repo, tag, path):
    r = subprocess.run(
        ["git", "-C", repo, "show", f"{tag}:{path}"],
        capture_output=True,
        text=True,
    )
    return r.stdout if r.returncode == 0 else ""


def parse(text, minor=None):
    """Gate names declared, and gate -> (first locked minor, value); an
    unversioned lock counts from `minor`, the tag's."""
    consts = {c: name for c, name in DECL.findall(text)}
    gates = set(consts.values())
    locked = {}
    starts = [(m.start(), m.group(1)) for m in BLOCK.finditer(text)]
    for i, (at, ident) in enumerate(starts):
        end = starts[i + 1][0] if i + 1 < len(starts) else len(text)
        name = consts.get(ident, ident)
        for minor, default in SPEC.findall(text[at:end]):
            minor = int(minor)
            if name not in locked or minor < locked[name][0]:
                locked[name] = (minor, default == "true")
    if minor is not None:
        for ident, default in UNVERSIONED.findall(text):
            name = consts.get(ident, ident)
            if name not in locked:
                locked[name] = (minor, default == "true")
    return gates, locked


def trim(text):
    """The lines `parse` reads, and nothing else: the declarations, the
    headers of versioned lists with their locked specs, the unversioned
    locked specs. The fixtures under tests/tools/feature_gates/ are the
    real files trimmed this way (`--trim FILE`)."""
    keep = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if DECL.match(line) or UNVERSIONED.match(line):
            keep.append(line)
        elif BLOCK.match(line):
            body = []
            for nxt in lines[i + 1 :]:
                if BLOCK.match(nxt) or nxt.strip() in ("},", "}"):
                    break
                if "LockToDefault: true" in nxt:
                    body.append(nxt)
            if body:
                keep.append(line)
                keep.extend(body)
                keep.append("\t},")
    return "\n".join(keep) + "\n"


def tag_minor(tag):
    return int(tag.lstrip("v").split(".")[1])


def derive(texts_by_tag):
    """[(tag, text)] in order -> lines to print."""
    out = []
    before = None
    for tag, text in texts_by_tag:
        minor = tag_minor(tag)
        gates, locked = parse(text, minor)
        if before is not None:
            for g in sorted(before - gates):
                out.append(f"removed {g} 1.{minor} ({tag})")
            for g in sorted(gates - before):
                out.append(f"added {g} 1.{minor} ({tag})")
        for g, (lmin, value) in sorted(locked.items()):
            if lmin <= minor and g in gates:
                out.append(f"locked {g} 1.{lmin} {str(value).lower()} ({tag})")
        before = gates
    return out


FIXTURE_OLD = """
const (
\tAnyVolumeDataSource featuregate.Feature = "AnyVolumeDataSource"
\tVolumeAttributesClass featuregate.Feature = "VolumeAttributesClass"
)
var defaultVersionedKubernetesFeatureGates = map[featuregate.Feature]featuregate.VersionedSpecs{
\tAnyVolumeDataSource: {
\t\t{Version: version.MustParse("1.18"), Default: false, PreRelease: featuregate.Alpha},
\t\t{Version: version.MustParse("1.24"), Default: true, PreRelease: featuregate.Beta},
\t\t{Version: version.MustParse("1.33"), Default: true, PreRelease: featuregate.GA, LockToDefault: true},
\t},
\tVolumeAttributesClass: {
\t\t{Version: version.MustParse("1.34"), Default: true, PreRelease: featuregate.GA},
\t\t{Version: version.MustParse("1.36"), Default: true, PreRelease: featuregate.GA, LockToDefault: true},
\t},
}
"""
FIXTURE_NEW = """
const (
\tVolumeAttributesClass featuregate.Feature = "VolumeAttributesClass"
)
var defaultVersionedKubernetesFeatureGates = map[featuregate.Feature]featuregate.VersionedSpecs{
\tVolumeAttributesClass: {
\t\t{Version: version.MustParse("1.34"), Default: true, PreRelease: featuregate.GA},
\t\t{Version: version.MustParse("1.36"), Default: true, PreRelease: featuregate.GA, LockToDefault: true},
\t},
}
"""


def self_test():
    got = derive([("v1.36.0", FIXTURE_OLD), ("v1.37.0", FIXTURE_NEW)])
    want = [
        "locked AnyVolumeDataSource 1.33 true (v1.36.0)",
        "locked VolumeAttributesClass 1.36 true (v1.36.0)",
        "removed AnyVolumeDataSource 1.37 (v1.37.0)",
        "locked VolumeAttributesClass 1.36 true (v1.37.0)",
    ]
    assert got == want, got
    print("self-test ok")


def fixtures(root):
    """[(tag, text)] from ROOT/<tag>/*.go (trimmed real files), by minor."""
    tags = sorted(
        (d for d in os.listdir(root) if d.startswith("v1.")), key=tag_minor
    )
    return [
        (t, "\n".join(open(f).read() for f in sorted(glob.glob(f"{root}/{t}/*.go"))))
        for t in tags
    ]


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) == 3 and argv[1] == "--fixtures":
        for line in derive(fixtures(argv[2])):
            print(line)
        return None
    if len(argv) == 3 and argv[1] == "--trim":
        sys.stdout.write(trim(open(argv[2]).read()))
        return None
    if len(argv) < 3:
        sys.exit(__doc__)
    repo, tags = argv[1], argv[2:]
    texts = [(t, "\n".join(show(repo, t, f) for f in FILES)) for t in tags]
    for line in derive(texts):
        print(line)


if __name__ == "__main__":
    main(sys.argv)
