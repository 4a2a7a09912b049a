//! What systemd-sysext does at boot, done by node-init inside the node's
//! mount namespace: loop-mount (read-only) the image
//! `/etc/extensions/kubernetes.raw` resolves to, check its
//! extension-release against the node's os-release, and overlay its `usr`
//! over the node's `/usr`, read-only as a merged `/usr` is. A missing or
//! dangling link, or an image that does not mount or does not fit, merges
//! nothing: there is then no kubelet, kubeadm or kubectl on the node.
//!
//! The loop device is set up by util-linux `mount -o loop,ro`, which marks
//! it auto-clearing: it goes away with the last mount of the image, which is
//! the node's mount namespace, so nothing outlives the node.

use std::ffi::CString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::image::{RELEASE_FILE, VERSION_FILE};
use crate::provision::CURRENT_SYMLINK;
use crate::version::Version;

/// What the boot merged.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Merged {
    /// The version in the merged image's `usr/local/share/kubernetes-version`.
    pub version: Option<Version>,
    /// The containerd sysext's version (`2.1.4`), when one was merged.
    pub containerd: Option<String>,
    /// Why something was not merged, for the `(boot)` event.
    pub notes: Vec<String>,
}

/// One extension ready to be a layer of the merged `/usr`.
struct Layer {
    usr: PathBuf,
    /// Its loop mount, detached once the overlay holds it.
    mount: Option<PathBuf>,
}

/// Merges the kubernetes sysext, and the containerd one when
/// `/etc/extensions/containerd.raw` exists, into `/usr` as one read-only
/// overlay (as systemd-sysext merges every extension at once), or leaves
/// `/usr` alone (and read-only). `image` overrides the kubernetes symlink
/// (a first boot runs what the scenario says even when the link already
/// points at a staged image); `staging` is an empty directory for the
/// kubernetes image's own mount (containerd's is its sibling), detached
/// once the overlay holds it.
///
/// A light node (`light` = the fleet's directory of unpacked images) does
/// not loop-mount: it overlays the unpacked tree of the version the image's
/// file name says, so a thousand nodes need no loop device.
pub fn merge(staging: &Path, image: Option<&str>, light: Option<&Path>) -> Merged {
    let mut merged = Merged::default();
    let mut layers = Vec::new();
    let target = match image {
        Some(path) => Ok(Path::new(path).to_path_buf()),
        None => fs::canonicalize(CURRENT_SYMLINK)
            .map_err(|e| anyhow::anyhow!("{}", link_problem(CURRENT_SYMLINK, &e))),
    };
    let kube = target.and_then(|t| {
        let layer = layer(staging, &t, light, Kind::Kubernetes)?;
        let version = kube_version(&layer.usr).with_context(|| format!("{}", t.display()));
        finish(layer, version, &mut layers)
    });
    match kube {
        Ok(v) => merged.version = Some(v),
        Err(e) => merged
            .notes
            .push(format!("no kubernetes sysext merged: {e:#}")),
    }
    let link = crate::containerd::CURRENT_SYMLINK;
    if fs::symlink_metadata(link).is_ok() {
        let containerd = fs::canonicalize(link)
            .map_err(|e| anyhow::anyhow!("{}", link_problem(link, &e)))
            .and_then(|t| {
                let staging = staging.with_file_name("sysext-containerd");
                let layer = layer(&staging, &t, light, Kind::Containerd)?;
                let version =
                    containerd_version(&layer.usr).with_context(|| format!("{}", t.display()));
                finish(layer, version, &mut layers)
            });
        match containerd {
            Ok(v) => merged.containerd = Some(v),
            Err(e) => merged
                .notes
                .push(format!("no containerd sysext merged: {e:#}")),
        }
    }
    let result = if layers.is_empty() {
        remount_usr_read_only()
    } else {
        let lower: Vec<String> = layers.iter().map(|l| l.usr.display().to_string()).collect();
        mount_overlay_ro("/usr", &format!("lowerdir={}:/usr", lower.join(":")))
    };
    // The overlay keeps the images mounted; their own mounts are detached
    // so that nothing but /usr shows them.
    for l in &layers {
        if let Some(m) = &l.mount {
            detach(m);
        }
    }
    if let Err(e) = result {
        merged.notes.push(format!("{e:#}"));
        merged.version = None;
        merged.containerd = None;
    }
    merged
}

/// Keeps a layer whose content checked out; detaches one that did not.
fn finish<T>(layer: Layer, checked: Result<T>, layers: &mut Vec<Layer>) -> Result<T> {
    match checked {
        Ok(v) => {
            layers.push(layer);
            Ok(v)
        }
        Err(e) => {
            if let Some(m) = &layer.mount {
                detach(m);
            }
            Err(e)
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Kubernetes,
    Containerd,
}

fn link_problem(link: &str, e: &std::io::Error) -> String {
    match fs::read_link(link) {
        Ok(target) => format!("{link} → {}: {e}", target.display()),
        Err(_) => format!("{link}: {e}"),
    }
}

/// The image's tree: loop-mounted on `staging`, or a light node's unpacked copy.
fn layer(staging: &Path, image: &Path, light: Option<&Path>, kind: Kind) -> Result<Layer> {
    if let Some(unpacked) = light {
        return unpacked_layer(unpacked, image, kind);
    }
    fs::create_dir_all(staging).with_context(|| format!("creating {}", staging.display()))?;
    let out = Command::new("/usr/bin/mount")
        .args(["-o", "loop,ro"])
        .arg(image)
        .arg(staging)
        .output()
        .context("running mount (apt-get install mount)")?;
    if !out.status.success() {
        bail!(
            "{}: {}",
            image.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(Layer {
        usr: staging.join("usr"),
        mount: Some(staging.to_path_buf()),
    })
}

fn unpacked_layer(unpacked: &Path, image: &Path, kind: Kind) -> Result<Layer> {
    let name = image
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if !image.is_file() {
        bail!("{}: no such image", image.display());
    }
    let (dir_name, entries) = match kind {
        Kind::Kubernetes => {
            let version = Version::from_image_name(&name)
                .with_context(|| format!("{}: not a kubernetes image name", image.display()))?;
            (version.to_string(), crate::image::tree(&version))
        }
        Kind::Containerd => {
            let version = name
                .strip_prefix("containerd-")
                .and_then(|r| r.strip_suffix("-x86-64.raw"))
                .filter(|v| crate::containerd::check_version(v).is_ok())
                .with_context(|| format!("{}: not a containerd image name", image.display()))?;
            (
                format!("containerd-{version}"),
                crate::containerd::tree(version),
            )
        }
    };
    let dir = unpacked.join(&dir_name);
    if !dir.join("usr").is_dir() {
        // Nodes boot in parallel: each builds aside under a name of its
        // own, then renames into place; the first rename wins. (Not the
        // pid: every node-init is pid 1 in its own namespace, and two
        // nodes sharing one scratch tree removed it under each other.)
        let tmp = unpacked.join(format!(".{dir_name}.{}", scratch_suffix()));
        let built = write_tree(&tmp, &entries);
        let renamed = built.is_ok() && fs::rename(&tmp, &dir).is_ok();
        if !renamed {
            let _ = fs::remove_dir_all(&tmp);
        }
        if !dir.join("usr").is_dir() {
            built?;
            bail!(
                "{}: could not put the unpacked tree in place",
                dir.display()
            );
        }
    }
    Ok(Layer {
        usr: dir.join("usr"),
        mount: None,
    })
}

fn write_tree(root: &Path, entries: &[crate::image::Entry]) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    for e in entries {
        let path = root.join(&e.path);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        }
        fs::write(&path, &e.content).with_context(|| format!("writing {}", path.display()))?;
        fs::set_permissions(&path, fs::Permissions::from_mode(e.mode))?;
    }
    Ok(())
}

/// Unique among the nodes of a fleet: the node's name (its UTS namespace's
/// hostname), the pid and the time.
fn scratch_suffix() -> String {
    let host = fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("{}.{}.{nanos}", host.trim(), std::process::id())
}

fn os_release_fits(root: &Path, release_file: &str) -> Result<()> {
    let release = fs::read_to_string(root.join(release_file))
        .with_context(|| format!("reading {release_file}"))?;
    let host = fs::read_to_string("/usr/lib/os-release").context("reading /usr/lib/os-release")?;
    if let Err(why) = release_fits(&release, &host) {
        bail!("not merged: {why}");
    }
    Ok(())
}

/// A kubernetes image's version, once its extension-release fits.
fn kube_version(usr: &Path) -> Result<Version> {
    let root = usr.parent().unwrap_or(usr);
    os_release_fits(root, RELEASE_FILE)?;
    let text = fs::read_to_string(root.join(VERSION_FILE))
        .with_context(|| format!("reading {VERSION_FILE}"))?;
    Version::parse(text.trim()).with_context(|| VERSION_FILE.to_string())
}

/// A containerd image's version (what its `containerd` runs as).
fn containerd_version(usr: &Path) -> Result<String> {
    let root = usr.parent().unwrap_or(usr);
    os_release_fits(root, crate::containerd::RELEASE_FILE)?;
    let wrapper =
        fs::read_to_string(usr.join("bin/containerd")).context("reading usr/bin/containerd")?;
    crate::containerd::wrapper_version(&wrapper).context("usr/bin/containerd names no version")
}

/// `KEY=value` lines of an os-release style file (quotes removed).
pub fn release_fields(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().trim_matches('"').to_string()))
        .collect()
}

/// systemd-sysext's compatibility rules, as far as the bakery's images use
/// them: the ID must be the host's (or `_any`), SYSEXT_LEVEL the host's,
/// and the architecture this machine's.
pub fn release_fits(extension: &str, os_release: &str) -> Result<(), String> {
    let ext = release_fields(extension);
    let host = release_fields(os_release);
    let get = |fields: &[(String, String)], key: &str| {
        fields
            .iter()
            .rfind(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
    };
    let Some(id) = get(&ext, "ID") else {
        return Err("its extension-release has no ID=".into());
    };
    if id != "_any" {
        let host_id = get(&host, "ID").unwrap_or_default();
        if id != host_id {
            return Err(format!("it is for ID={id}, this node is ID={host_id}"));
        }
        let level = get(&ext, "SYSEXT_LEVEL");
        let host_level = get(&host, "SYSEXT_LEVEL");
        if level.is_some() && level != host_level {
            return Err(format!(
                "it needs SYSEXT_LEVEL={}, this node has {}",
                level.unwrap_or_default(),
                host_level.unwrap_or_else(|| "none".into())
            ));
        }
    }
    match get(&ext, "ARCHITECTURE") {
        Some(a) if a != "x86-64" => Err(format!("it is for ARCHITECTURE={a}, this node is x86-64")),
        _ => Ok(()),
    }
}

fn cstr(s: &str) -> Result<CString> {
    CString::new(s).with_context(|| format!("{s:?} contains a NUL byte"))
}

fn mount_overlay_ro(target: &str, options: &str) -> Result<()> {
    let (src, t, fstype, data) = (
        cstr("overlay")?,
        cstr(target)?,
        cstr("overlay")?,
        cstr(options)?,
    );
    // SAFETY: valid NUL-terminated strings.
    let rc = unsafe {
        libc::mount(
            src.as_ptr(),
            t.as_ptr(),
            fstype.as_ptr(),
            libc::MS_RDONLY | libc::MS_NODEV,
            data.as_ptr().cast(),
        )
    };
    if rc != 0 {
        bail!(
            "overlaying {target} ({options}): {}",
            std::io::Error::last_os_error()
        );
    }
    Ok(())
}

/// A node's /usr is read-only whether or not anything was merged, as on
/// Flatcar.
fn remount_usr_read_only() -> Result<()> {
    let (src, t) = (cstr("/usr")?, cstr("/usr")?);
    let flags = libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY;
    // SAFETY: valid NUL-terminated strings; no data.
    let rc = unsafe {
        libc::mount(
            src.as_ptr(),
            t.as_ptr(),
            std::ptr::null(),
            flags,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        bail!(
            "remounting /usr read-only: {}",
            std::io::Error::last_os_error()
        );
    }
    Ok(())
}

fn detach(path: &Path) {
    if let Ok(c) = cstr(&path.to_string_lossy()) {
        // SAFETY: valid NUL-terminated string.
        unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn light_nodes_booting_at_once_all_get_the_whole_unpacked_tree() {
        // Threads share a pid, as every node-init (pid 1 in its namespace)
        // does: the scratch trees must not collide all the same.
        for _ in 0..5 {
            let dir = tempfile::tempdir().unwrap();
            let unpacked = dir.path().join("light");
            fs::create_dir(&unpacked).unwrap();
            let image = dir.path().join("kubernetes-v1.34.2-x86-64.raw");
            fs::write(&image, b"squashfs").unwrap();
            let want = crate::image::tree(&Version::parse("v1.34.2").unwrap());
            let layers: Vec<Result<Layer>> = std::thread::scope(|scope| {
                let handles: Vec<_> = (0..8)
                    .map(|_| scope.spawn(|| unpacked_layer(&unpacked, &image, Kind::Kubernetes)))
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap()).collect()
            });
            for layer in layers {
                let layer = layer.unwrap_or_else(|e| panic!("a node's merge failed: {e:#}"));
                let root = layer.usr.parent().unwrap();
                for e in &want {
                    assert_eq!(
                        fs::read_to_string(root.join(&e.path)).ok().as_deref(),
                        Some(e.content.as_str()),
                        "{}",
                        e.path
                    );
                }
            }
            let left: Vec<_> = fs::read_dir(&unpacked)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            assert_eq!(left, ["v1.34.2"], "no scratch tree is left behind");
        }
    }

    const FLATCAR: &str = "ID=flatcar\nID_LIKE=coreos\nVERSION_ID=4081.2.0\nSYSEXT_LEVEL=1.0\n";

    #[test]
    fn the_bakerys_release_fits_flatcar() {
        let ext = crate::image::tree(&Version::parse("v1.35.3").unwrap())
            .into_iter()
            .find(|e| e.path == RELEASE_FILE)
            .unwrap()
            .content;
        assert_eq!(release_fits(&ext, FLATCAR), Ok(()));
        assert_eq!(release_fits("ID=_any\n", FLATCAR), Ok(()));
    }

    #[test]
    fn other_systems_levels_and_architectures_do_not() {
        assert_eq!(
            release_fits("ID=fedora\nSYSEXT_LEVEL=1.0\n", FLATCAR),
            Err("it is for ID=fedora, this node is ID=flatcar".into())
        );
        assert_eq!(
            release_fits("ID=flatcar\nSYSEXT_LEVEL=2.0\n", FLATCAR),
            Err("it needs SYSEXT_LEVEL=2.0, this node has 1.0".into())
        );
        assert_eq!(
            release_fits("ID=flatcar\nARCHITECTURE=arm64\n", FLATCAR),
            Err("it is for ARCHITECTURE=arm64, this node is x86-64".into())
        );
        assert!(release_fits("SYSEXT_LEVEL=1.0\n", FLATCAR).is_err());
    }
}
