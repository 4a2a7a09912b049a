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
use std::path::Path;
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
    /// Why something was not merged, for the `(boot)` event.
    pub notes: Vec<String>,
}

/// Merges the kubernetes sysext into `/usr`, or leaves `/usr` alone (and
/// read-only). `image` overrides the symlink (a first boot runs what the
/// scenario says even when the link already points at a staged image);
/// `staging` is an empty directory for the image's own mount, which is
/// detached once the overlay holds it.
///
/// A light node (`light` = the fleet's directory of unpacked images) does
/// not loop-mount: it overlays the unpacked tree of the version the image's
/// file name says, so a thousand nodes need no loop device.
pub fn merge(staging: &Path, image: Option<&str>, light: Option<&Path>) -> Merged {
    let mut merged = Merged::default();
    let target = match image {
        Some(path) => Ok(Path::new(path).to_path_buf()),
        None => {
            fs::canonicalize(CURRENT_SYMLINK).map_err(|e| anyhow::anyhow!("{}", link_problem(&e)))
        }
    };
    let outcome = match (target, light) {
        (Ok(target), None) => merge_image(staging, &target),
        (Ok(target), Some(unpacked)) => merge_unpacked(unpacked, &target),
        (Err(e), _) => Err(e),
    };
    match outcome {
        Ok(version) => merged.version = Some(version),
        Err(e) => {
            merged
                .notes
                .push(format!("no kubernetes sysext merged: {e:#}"));
            if let Err(e) = remount_usr_read_only() {
                merged.notes.push(format!("{e:#}"));
            }
        }
    }
    merged
}

fn link_problem(e: &std::io::Error) -> String {
    match fs::read_link(CURRENT_SYMLINK) {
        Ok(target) => format!("{CURRENT_SYMLINK} → {}: {e}", target.display()),
        Err(_) => format!("{CURRENT_SYMLINK}: {e}"),
    }
}

fn merge_image(staging: &Path, image: &Path) -> Result<Version> {
    fs::create_dir_all(staging).with_context(|| format!("creating {}", staging.display()))?;
    let out = Command::new("/usr/bin/mount")
        .args(["-o", "loop,ro"])
        .arg(image)
        .arg(staging)
        .output()
        .context("running mount (apt-get install mount)")?;
    if !out.status.success() {
        bail!("{}", String::from_utf8_lossy(&out.stderr).trim());
    }
    let result = check_and_overlay(staging);
    // The overlay keeps the image mounted; the staging mount itself is
    // detached so that nothing but /usr shows it.
    detach(staging);
    result.with_context(|| format!("{}", image.display()))
}

fn merge_unpacked(unpacked: &Path, image: &Path) -> Result<Version> {
    let name = image
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if !image.is_file() {
        bail!("{}: no such image", image.display());
    }
    let version = Version::from_image_name(&name)
        .with_context(|| format!("{}: not a kubernetes image name", image.display()))?;
    let dir = unpacked.join(version.to_string());
    if !dir.join(VERSION_FILE).exists() {
        // Nodes boot in parallel: build aside, then rename into place.
        let tmp = unpacked.join(format!(".{version}.{}", std::process::id()));
        for e in crate::image::tree(&version) {
            let path = tmp.join(&e.path);
            if let Some(parent) = path.parent() {
                fs::create_dir_all(parent)
                    .with_context(|| format!("creating {}", parent.display()))?;
            }
            fs::write(&path, &e.content).with_context(|| format!("writing {}", path.display()))?;
            use std::os::unix::fs::PermissionsExt;
            fs::set_permissions(&path, fs::Permissions::from_mode(e.mode))?;
        }
        if fs::rename(&tmp, &dir).is_err() {
            let _ = fs::remove_dir_all(&tmp);
        }
    }
    check_and_overlay(&dir).with_context(|| format!("{}", image.display()))
}

fn check_and_overlay(staging: &Path) -> Result<Version> {
    let release = fs::read_to_string(staging.join(RELEASE_FILE))
        .with_context(|| format!("reading {RELEASE_FILE}"))?;
    let host = fs::read_to_string("/usr/lib/os-release").context("reading /usr/lib/os-release")?;
    if let Err(why) = release_fits(&release, &host) {
        bail!("not merged: {why}");
    }
    let text = fs::read_to_string(staging.join(VERSION_FILE))
        .with_context(|| format!("reading {VERSION_FILE}"))?;
    let version = Version::parse(text.trim()).with_context(|| VERSION_FILE.to_string())?;
    let usr = staging.join("usr");
    let options = format!("lowerdir={}:/usr", usr.display());
    mount_overlay_ro("/usr", &options)?;
    Ok(version)
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
