//! The kubernetes sysext images the hub serves and the nodes boot: real
//! squashfs file systems, built with `mksquashfs -all-root -noappend` as
//! sysext-bakery builds them (lib/generate.sh), with the bakery's layout
//! (kubernetes.sysext/create.sh): the three binaries in `usr/bin`, the
//! version in `usr/local/share/kubernetes-version`, the extension-release
//! file, and the kubelet unit with its kubeadm drop-in.
//!
//! The binaries are small shell wrappers that run the node's fleetsim
//! multi-call binary (hard-linked at [`TOOL_DIR`] in every node's base
//! `/usr`) as that tool, telling it the image's version in
//! [`TOOL_VERSION_ENV`]. So a tool reports the version of the file that was
//! run — the staged image's kubeadm, mounted by hand, is the new one — and
//! nothing in the base `/usr` is a kubelet, kubeadm or kubectl.
//!
//! Images are reproducible (every timestamp 0, no xattrs, root-owned), so a
//! version always has the same bytes and sha256, and they are cached across
//! fleets: building ~40 per fleet would cost more than booting it.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Context, Result, bail};

use crate::version::Version;

/// Bumped whenever [`tree`] changes, so a cache never serves an image of
/// another layout.
pub const IMAGE_FORMAT: u32 = 1;
/// Where the multi-call binary sits inside every node, once per tool name.
pub const TOOL_DIR: &str = "/usr/lib/fleetsim";
/// The tools an image carries (and the base `/usr` does not).
pub const IMAGE_TOOLS: [&str; 3] = ["kubectl", "kubeadm", "kubelet"];
/// Set by an image's wrapper: the version of the binary being run.
pub const TOOL_VERSION_ENV: &str = "FLEETSIM_TOOL_VERSION";
/// Overrides the cache directory (default [`DEFAULT_CACHE`]).
pub const CACHE_ENV: &str = "FLEETSIM_IMAGE_CACHE";
/// Not under a directory the nodes overlay, and on the same file system as
/// the fleets' state directories in the usual setup.
pub const DEFAULT_CACHE: &str = "/tmp/fleetsim-images";
/// The file inside an image that names its version (the bakery's).
pub const VERSION_FILE: &str = "usr/local/share/kubernetes-version";
/// The extension-release file systemd-sysext checks before merging.
pub const RELEASE_FILE: &str = "usr/lib/extension-release.d/extension-release.kubernetes";

/// One file of an image, path relative to the image root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub path: String,
    pub mode: u32,
    pub content: String,
}

fn entry(path: &str, mode: u32, content: String) -> Entry {
    Entry {
        path: path.to_string(),
        mode,
        content,
    }
}

/// Everything in the image for `version`.
pub fn tree(version: &Version) -> Vec<Entry> {
    let mut files: Vec<Entry> = IMAGE_TOOLS
        .iter()
        .map(|tool| entry(&format!("usr/bin/{tool}"), 0o755, wrapper(tool, version)))
        .collect();
    files.push(entry(VERSION_FILE, 0o644, format!("{version}\n")));
    // generate.sh writes ID/SYSEXT_LEVEL/ARCHITECTURE; create.sh's
    // RELOAD_SERVICES_ON_MERGE=true adds EXTENSION_RELOAD_MANAGER=1.
    files.push(entry(
        RELEASE_FILE,
        0o644,
        "ID=flatcar\nSYSEXT_LEVEL=1.0\nARCHITECTURE=x86-64\nEXTENSION_RELOAD_MANAGER=1\n".into(),
    ));
    files.push(entry(
        "usr/lib/systemd/system/kubelet.service",
        0o644,
        KUBELET_SERVICE.into(),
    ));
    files.push(entry(
        "usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf",
        0o644,
        KUBEADM_DROP_IN.into(),
    ));
    files.push(entry(
        "usr/lib/systemd/system/multi-user.target.d/10-kubelet-service.conf",
        0o644,
        "[Unit]\nUpholds=kubelet.service\n".into(),
    ));
    files
}

/// The kubelet unit as the bakery ships it, minus what the sim does not
/// emulate (ordering against the network). fleetsim's node-init reads
/// `ExecStart=`; the scenario's `kubelet_restart` stands in for RestartSec.
const KUBELET_SERVICE: &str = "\
[Unit]
Description=kubelet: The Kubernetes Node Agent
Documentation=https://kubernetes.io/docs/home/

[Service]
ExecStart=/usr/bin/kubelet
Restart=always
StartLimitInterval=0
RestartSec=10

[Install]
WantedBy=multi-user.target
";

/// The kubeadm drop-in: where the kubelet's flags and config come from.
/// The bakery's ExecStartPre= lines (copying CNI plugins and the version
/// file) are left out: nothing in the sim reads what they write.
const KUBEADM_DROP_IN: &str = "\
[Service]
Environment=\"KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf\"
Environment=\"KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml\"
# Written by kubeadm init/join, rewritten by kubeadm upgrade.
EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env
EnvironmentFile=-/etc/sysconfig/kubelet
ExecStart=
ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS
";

/// `usr/bin/<tool>`: the node's fleetsim binary as `tool`, at `version`.
/// A variable rather than an argument, so argv stays what the user typed.
fn wrapper(tool: &str, version: &Version) -> String {
    format!(
        "#!/bin/sh\n\
         # {tool} {version} as fleetsim emulates it: the node's multi-call binary,\n\
         # told which version this image carries (see docs/simulator.md, \"Images\").\n\
         export {TOOL_VERSION_ENV}={version}\n\
         exec {TOOL_DIR}/{tool} \"$@\"\n"
    )
}

/// A directory of built images, shared by every fleet on the machine.
#[derive(Debug, Clone)]
pub struct Cache {
    dir: PathBuf,
}

static BUILDS: AtomicU64 = AtomicU64::new(0);

impl Cache {
    /// `$FLEETSIM_IMAGE_CACHE` or [`DEFAULT_CACHE`], created if needed. It
    /// must belong to us and be writable by nobody else: nodes boot what it
    /// holds.
    pub fn default_location() -> Result<Cache> {
        let root = std::env::var_os(CACHE_ENV)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(DEFAULT_CACHE));
        Cache::at(&root)
    }

    /// A cache under `root` (created if needed, checked as above).
    pub fn at(root: &Path) -> Result<Cache> {
        fs::create_dir_all(root).with_context(|| format!("creating {}", root.display()))?;
        let meta = fs::metadata(root).with_context(|| format!("reading {}", root.display()))?;
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        if meta.uid() != me || meta.mode() & 0o022 != 0 {
            bail!(
                "the image cache {} belongs to uid {} with mode {:o}: it must be ours and not writable by others \
                 (remove it, or set {CACHE_ENV} to another directory)",
                root.display(),
                meta.uid(),
                meta.mode() & 0o7777
            );
        }
        let dir = root.join(format!("format-{IMAGE_FORMAT}"));
        fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(Cache { dir })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The cached image for `version`, built first if missing. Concurrent
    /// callers (parallel test fleets) may build the same image twice; each
    /// renames its own complete file into place, so readers never see half
    /// an image.
    pub fn image(&self, version: &Version) -> Result<PathBuf> {
        self.cached(&version.image_name(), || tree(version))
    }

    /// The cached containerd image for `version` (`2.1.4`), built if missing.
    pub fn containerd(&self, version: &str) -> Result<PathBuf> {
        crate::containerd::check_version(version)?;
        self.cached(&crate::containerd::image_name(version), || {
            crate::containerd::tree(version)
        })
    }

    fn cached(&self, name: &str, tree: impl Fn() -> Vec<Entry>) -> Result<PathBuf> {
        let path = self.dir.join(name);
        if path.is_file() {
            return Ok(path);
        }
        let n = BUILDS.fetch_add(1, Ordering::Relaxed);
        let stem = format!(".build-{}-{n}", std::process::id());
        let root = self.dir.join(&stem);
        let tmp = self.dir.join(format!("{stem}.raw"));
        let built = build(&tree(), &root, &tmp);
        let _ = fs::remove_dir_all(&root);
        if let Err(e) = built {
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
        fs::rename(&tmp, &path).with_context(|| format!("renaming into {}", path.display()))?;
        Ok(path)
    }

    /// [`Cache::image`] for each version, built on a few threads.
    pub fn images(&self, versions: &[Version]) -> Result<Vec<PathBuf>> {
        let threads = versions.len().clamp(1, 4);
        let chunk = versions.len().div_ceil(threads).max(1);
        std::thread::scope(|s| {
            let handles: Vec<_> = versions
                .chunks(chunk)
                .map(|part| s.spawn(move || part.iter().map(|v| self.image(v)).collect()))
                .collect();
            let mut out = Vec::new();
            for h in handles {
                let part: Result<Vec<PathBuf>> = h
                    .join()
                    .map_err(|_| anyhow::anyhow!("an image build thread panicked"))?;
                out.extend(part?);
            }
            Ok(out)
        })
    }
}

/// Writes `entries` under `root` and squashes it into `dest`.
fn build(entries: &[Entry], root: &Path, dest: &Path) -> Result<()> {
    let _ = fs::remove_dir_all(root);
    for e in entries {
        let path = root.join(&e.path);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        }
        fs::write(&path, &e.content).with_context(|| format!("writing {}", path.display()))?;
        fs::set_permissions(&path, fs::Permissions::from_mode(e.mode))
            .with_context(|| format!("chmod {}", path.display()))?;
    }
    // The umask must not decide the image's directory modes.
    chmod_dirs(root)?;
    let out = Command::new("mksquashfs")
        .arg(root)
        .arg(dest)
        // The bakery's flags, then what makes the bytes reproducible here
        // (the bakery sets SOURCE_DATE_EPOCH=0; mksquashfs refuses it
        // together with explicit times, so it is cleared).
        .args(["-all-root", "-noappend", "-no-xattrs"])
        .args(["-mkfs-time", "0", "-all-time", "0"])
        .args(["-quiet", "-no-progress", "-processors", "1"])
        .env_remove("SOURCE_DATE_EPOCH")
        .output()
        .context("running mksquashfs (apt-get install squashfs-tools)")?;
    if !out.status.success() {
        bail!(
            "mksquashfs {} failed ({}): {}",
            dest.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

fn chmod_dirs(dir: &Path) -> Result<()> {
    fs::set_permissions(dir, fs::Permissions::from_mode(0o755))
        .with_context(|| format!("chmod {}", dir.display()))?;
    for e in fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let e = e.with_context(|| format!("listing {}", dir.display()))?;
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            chmod_dirs(&e.path())?;
        }
    }
    Ok(())
}

/// A file of an image, read without mounting it (`unsquashfs -cat`).
pub fn read_file(image: &Path, inner: &str) -> Result<String> {
    let out = Command::new("unsquashfs")
        .arg("-cat")
        .arg(image)
        .arg(inner)
        .output()
        .context("running unsquashfs (apt-get install squashfs-tools)")?;
    if !out.status.success() {
        bail!(
            "{} has no readable {inner}: {}",
            image.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    String::from_utf8(out.stdout)
        .with_context(|| format!("{inner} in {} is not UTF-8", image.display()))
}

/// The version an image carries in its content (not its file name).
pub fn version_of(image: &Path) -> Result<Version> {
    let text = read_file(image, VERSION_FILE)?;
    Version::parse(text.trim()).with_context(|| format!("{VERSION_FILE} in {}", image.display()))
}

/// Copies a cached image to `dest` (a copy, not a link: a node or the hub
/// may have its file changed or corrupted by a test without touching the
/// cache).
pub fn copy_to(cached: &Path, dest: &Path) -> Result<()> {
    fs::copy(cached, dest)
        .with_context(|| format!("copying {} to {}", cached.display(), dest.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        Version::parse(s).unwrap()
    }

    #[test]
    fn the_layout_is_the_bakerys() {
        let paths: Vec<String> = tree(&v("v1.35.3")).into_iter().map(|e| e.path).collect();
        for want in [
            "usr/bin/kubectl",
            "usr/bin/kubeadm",
            "usr/bin/kubelet",
            "usr/local/share/kubernetes-version",
            "usr/lib/extension-release.d/extension-release.kubernetes",
            "usr/lib/systemd/system/kubelet.service",
            "usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf",
        ] {
            assert!(paths.iter().any(|p| p == want), "{want} in {paths:?}");
        }
        assert!(paths.iter().all(|p| p.starts_with("usr/")));
    }

    #[test]
    fn a_wrapper_runs_the_node_binary_as_its_tool_at_its_version() {
        let t = tree(&v("v1.35.3"));
        let kubeadm = t.iter().find(|e| e.path == "usr/bin/kubeadm").unwrap();
        assert_eq!(kubeadm.mode, 0o755);
        assert!(kubeadm.content.starts_with("#!/bin/sh\n"));
        assert!(kubeadm.content.contains(
            "\nexport FLEETSIM_TOOL_VERSION=v1.35.3\nexec /usr/lib/fleetsim/kubeadm \"$@\"\n"
        ));
    }

    #[test]
    fn images_are_squashfs_and_reproducible() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        let (ca, cb) = (Cache::at(a.path()).unwrap(), Cache::at(b.path()).unwrap());
        let version = v("v1.35.3");
        let (ia, ib) = (ca.image(&version).unwrap(), cb.image(&version).unwrap());
        assert_eq!(ia.file_name().unwrap(), "kubernetes-v1.35.3-x86-64.raw");
        let bytes = fs::read(&ia).unwrap();
        assert_eq!(&bytes[..4], b"hsqs", "a squashfs superblock");
        assert_eq!(bytes, fs::read(&ib).unwrap(), "same version, same bytes");
        assert_eq!(version_of(&ia).unwrap(), version);
        assert_eq!(
            read_file(&ia, RELEASE_FILE).unwrap(),
            "ID=flatcar\nSYSEXT_LEVEL=1.0\nARCHITECTURE=x86-64\nEXTENSION_RELOAD_MANAGER=1\n"
        );
        let other = ca.image(&v("v1.34.2")).unwrap();
        assert_ne!(bytes, fs::read(&other).unwrap());
        let left: Vec<_> = fs::read_dir(ca.dir()).unwrap().collect();
        assert_eq!(left.len(), 2, "no build leftovers: {left:?}");
        assert!(read_file(&ia, "usr/bin/nothing").is_err());
    }

    #[test]
    fn a_cache_writable_by_others_is_refused() {
        let d = tempfile::tempdir().unwrap();
        fs::set_permissions(d.path(), fs::Permissions::from_mode(0o777)).unwrap();
        let err = format!("{:#}", Cache::at(d.path()).unwrap_err());
        assert!(err.contains("not writable by others"), "{err}");
    }
}
