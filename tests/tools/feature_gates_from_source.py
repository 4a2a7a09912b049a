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
       feature_gates_from_source.py --self-test
Reads with `git show TAG:PATH`; changes nothing. Add the next minor by
running it with that minor's tag and the one before, and copy the lines
into the tables with the tag as their source.
"""

import re
import subprocess
import sys

FILES = [
    "pkg/features/kube_features.go",
    "pkg/features/versioned_kube_features.go",
    "staging/src/k8s.io/apiserver/pkg/features/kube_features.go",
    "staging/src/k8s.io/component-base/features/features.go",
]

DECL = re.compile(r'^\s*(\w+)\s+featuregate\.Feature\s*=\s*"(\w+)"', re.M)
# `Gate: {` opening a versioned list, then its `{Version: ...}` specs.
BLOCK = re.compile(r"^\s*(?:\w+\.)?(\w+):\s*\{\s*$", re.M)
SPEC = re.compile(
    r'\{\s*Version:\s*version\.MustParse\("1\.(\d+)"\)\s*,\s*Default:\s*(true|false)'
    r"[^}]*?LockToDefault:\s*true",
)


def show(repo, tag, path):
    r = subprocess.run(
        ["git", "-C", repo, "show", f"{tag}:{path}"],
        capture_output=True,
        text=True,
    )
    return r.stdout if r.returncode == 0 else ""


def parse(text):
    """Gate names declared, and gate -> (first locked minor, value)."""
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
    return gates, locked


def tag_minor(tag):
    return int(tag.lstrip("v").split(".")[1])


def derive(texts_by_tag):
    """[(tag, text)] in order -> lines to print."""
    out = []
    before = None
    for tag, text in texts_by_tag:
        gates, locked = parse(text)
        minor = tag_minor(tag)
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


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) < 3:
        sys.exit(__doc__)
    repo, tags = argv[1], argv[2:]
    texts = [(t, "\n".join(show(repo, t, f) for f in FILES)) for t in tags]
    for line in derive(texts):
        print(line)


if __name__ == "__main__":
    main(sys.argv)
