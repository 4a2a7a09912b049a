//! Files fleetctl writes on the operator's machine: the state directory
//! `.fleetctl/` (plans, journals, etcd snapshots — a snapshot holds every
//! Secret of the cluster), and names built from what a cluster reports.
//!
//! - A name part taken from the cluster (kubeadm-config's `clusterName`) is
//!   `[A-Za-z0-9._-]` without a leading dot, so `../..` or `/abs` cannot
//!   put a file outside the directory meant for it.
//! - A private directory is created 0700; an existing one must belong to
//!   the user running fleetctl and be writable by nobody else, or someone
//!   else could swap or read what fleetctl writes there.
//! - Files are created new (`O_CREAT|O_EXCL`), never through a symlink
//!   (`O_NOFOLLOW`), mode 0600: a link planted at the name fails the open
//!   instead of redirecting the write.

use std::fs::{DirBuilder, File, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::Path;

use anyhow::{Context, bail};

/// Longest name part accepted (a cluster name is a DNS label or subdomain in practice).
const MAX_NAME: usize = 128;

/// `value` if it can be part of a file name in a directory fleetctl owns:
/// letters, digits, `.`, `_`, `-`, not starting with `.`.
pub fn name_part<'a>(what: &str, value: &'a str) -> anyhow::Result<&'a str> {
    let shown = value.escape_default().to_string();
    if value.is_empty() {
        bail!("{what} is empty, so it cannot name a file");
    }
    if value.len() > MAX_NAME {
        bail!(
            "{what} is {} bytes long (at most {MAX_NAME} may name a file)",
            value.len()
        );
    }
    if let Some(bad) = value
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || "._-".contains(*c)))
    {
        bail!(
            "{what} `{shown}` contains `{}`: only letters, digits, '.', '_' and '-' may name a file \
             fleetctl writes",
            bad.escape_default()
        );
    }
    if value.starts_with('.') {
        bail!("{what} `{shown}` starts with '.', which fleetctl does not put in a file name");
    }
    Ok(value)
}

/// Creates `dir` (and missing parents) 0700 if needed, then checks it is
/// private (see [`check_private_dir`]).
pub fn private_dir(dir: &Path) -> anyhow::Result<()> {
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("creating {}", dir.display()))?;
    check_private_dir(dir)
}

/// `dir` must be a directory owned by the user fleetctl runs as, not
/// writable by its group or others.
pub fn check_private_dir(dir: &Path) -> anyhow::Result<()> {
    let meta = std::fs::metadata(dir).with_context(|| format!("reading {}", dir.display()))?;
    if !meta.is_dir() {
        bail!("{} is not a directory: move it away", dir.display());
    }
    // SAFETY: geteuid cannot fail and touches no memory.
    let me = unsafe { libc::geteuid() };
    if meta.uid() != me {
        bail!(
            "{} belongs to uid {}, not to you (uid {me}): fleetctl keeps plans, journals and etcd \
             snapshots there and will not use a directory someone else controls. Move it away, or \
             run fleetctl as its owner",
            dir.display(),
            meta.uid()
        );
    }
    if meta.mode() & 0o022 != 0 {
        bail!(
            "{} is writable by its group or others (mode {:o}): fleetctl keeps plans, journals and \
             etcd snapshots there. Run `chmod go-w {}` (or `chmod 700`) and try again",
            dir.display(),
            meta.mode() & 0o7777,
            dir.display()
        );
    }
    Ok(())
}

/// Creates `path` for writing: new, not through a symlink, mode 0600.
/// `Ok(None)` when the name is already taken (by a file or a link).
pub fn create_new(path: &Path) -> anyhow::Result<Option<File>> {
    match options().open(path) {
        Ok(file) => Ok(Some(file)),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(None),
        // O_NOFOLLOW on the last component: ELOOP.
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => Ok(None),
        Err(e) => Err(e).with_context(|| format!("creating {}", path.display())),
    }
}

/// [`create_new`], where a taken name is an error.
pub fn create_new_or_fail(path: &Path) -> anyhow::Result<File> {
    create_new(path)?.with_context(|| {
        format!(
            "{} already exists (or is a link): fleetctl only writes files it creates. Move it away \
             and try again",
            path.display()
        )
    })
}

fn options() -> OpenOptions {
    let mut options = OpenOptions::new();
    options
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC);
    options
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn names_that_leave_the_directory_are_refused() {
        assert_eq!(name_part("cluster", "kubernetes").unwrap(), "kubernetes");
        assert_eq!(name_part("cluster", "prod_eu-1.a").unwrap(), "prod_eu-1.a");
        for bad in ["../../x", "/abs", "a/b", "..", ".hidden", "", "a b", "a\nb"] {
            assert!(name_part("cluster", bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            name_part("the cluster name", "../x")
                .unwrap_err()
                .to_string(),
            "the cluster name `../x` contains `/`: only letters, digits, '.', '_' and '-' may name \
             a file fleetctl writes"
        );
    }

    proptest! {
        #[test]
        fn an_accepted_name_stays_in_its_directory(value in "\\PC{0,20}") {
            if let Ok(name) = name_part("x", &value) {
                let joined = Path::new("/d").join(name);
                prop_assert_eq!(joined.parent(), Some(Path::new("/d")));
                prop_assert!(!name.starts_with('.'));
            }
        }
    }

    #[test]
    fn a_directory_others_can_write_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join(".fleetctl");
        private_dir(&dir).unwrap();
        assert_eq!(std::fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o775)).unwrap();
        let err = private_dir(&dir).unwrap_err().to_string();
        assert!(
            err.contains("writable by its group or others (mode 775)"),
            "{err}"
        );
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        private_dir(&dir).unwrap();
    }

    #[test]
    fn a_directory_of_another_user_is_refused() {
        // Only root can give a directory away; elsewhere this test has nothing to check.
        if unsafe { libc::geteuid() } != 0 {
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join(".fleetctl");
        std::fs::create_dir(&dir).unwrap();
        std::os::unix::fs::chown(&dir, Some(65534), None).unwrap();
        let err = private_dir(&dir).unwrap_err().to_string();
        assert!(err.contains("belongs to uid 65534, not to you"), "{err}");
    }

    #[test]
    fn files_are_created_new_private_and_never_through_a_link() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("f");
        let file = create_new_or_fail(&path).unwrap();
        assert_eq!(file.metadata().unwrap().mode() & 0o777, 0o600);
        assert!(create_new(&path).unwrap().is_none(), "taken");
        let victim = tmp.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        assert!(create_new_or_fail(&link).is_err());
        let dangling = tmp.path().join("dangling");
        std::os::unix::fs::symlink(tmp.path().join("nowhere"), &dangling).unwrap();
        assert!(create_new_or_fail(&dangling).is_err());
        assert!(!tmp.path().join("nowhere").exists());
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
    }
}
