//! The real kubectl binaries a fleet's nodes run.
//!
//! The machine image ships kubectl 1.27 to 1.33 as
//! `/usr/lib/google-cloud-sdk/bin/kubectl.1.NN` (`/usr/bin/kubectl` there is
//! Google's dispatcher, not a kubectl). A fleet hard-links each of them into
//! its state directory once (`bin/clients/`), and every node gets them at
//! [`NODE_DIR`] the same way it gets the fleetsim binary: a real-OS node's
//! root is a Debian root, not the host's `/usr`, so a path on the host
//! would not do. The sysext image's `kubectl` picks the one whose minor is
//! closest to its own (`tools/kubectl.rs`): kubectl supports one
//! minor of skew against the API server, and none newer than 1.33 exists
//! here, so v1.34 to v1.37 nodes run kubectl 1.33.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// Where the machine image keeps its kubectl per minor.
pub const HOST_DIR: &str = "/usr/lib/google-cloud-sdk/bin";
/// Where every node finds them.
pub const NODE_DIR: &str = "/usr/lib/fleetsim/clients";

/// The Go runtime's settings for each real Go client the sim starts and
/// waits for: kubectl (`tools/kubectl.rs`, where the caller set none) and
/// etcdctl (`etcd_pod`). A kubectl call lives well under a second, yet a third
/// of its CPU went to the garbage collector running while the runtime and
/// kubectl's API scheme start up (`perf stat` of `kubectl version
/// --client`: 46 → 30 ms of CPU), and the suite makes thousands of calls:
/// the real kubectl was its largest CPU consumer. GOGC=off with a
/// GOMEMLIMIT is the runtime's documented pairing (runtime/extern.go; Go
/// proposal 48409, "Soft memory limit": with GOGC=off the heap grows to
/// the limit, and only then is collected), so a long `kubectl drain` or
/// `wait` still stays bounded. What kubectl prints and does is unchanged.
/// etcdctl gains less (`etcdctl version`: 11.6 → 10.6 ms; Debian's is
/// built with Go 1.19, the first to read GOMEMLIMIT).
pub const GO_RUNTIME: &[(&str, &str)] = &[("GOGC", "off"), ("GOMEMLIMIT", "256MiB")];

/// `kubectl.1.NN` → NN.
pub fn minor_of(file_name: &str) -> Option<u32> {
    let minor = file_name.strip_prefix("kubectl.1.")?;
    if minor.is_empty() || !minor.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    minor.parse().ok()
}

/// The kubectl binaries in `dir`, by minor, oldest first.
pub fn listed(dir: &Path) -> Vec<(u32, PathBuf)> {
    let mut found: Vec<(u32, PathBuf)> = fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .filter_map(|e| {
                    let minor = minor_of(&e.file_name().to_string_lossy())?;
                    Some((minor, e.path()))
                })
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found
}

/// The binary whose minor is closest to `minor`; on a tie the newer one
/// (a client newer than the server is the skew kubectl documents first).
pub fn closest(minor: u32, available: &[(u32, PathBuf)]) -> Option<&Path> {
    available
        .iter()
        .min_by_key(|(m, _)| (m.abs_diff(minor), std::cmp::Reverse(*m)))
        .map(|(_, p)| p.as_path())
}

/// Links every host kubectl into `dest` (a fleet's `bin/clients`): a hard
/// link where the file systems allow it, else a copy.
pub fn gather(dest: &Path) -> Result<()> {
    let host = listed(Path::new(HOST_DIR));
    if host.is_empty() {
        bail!(
            "no real kubectl in {HOST_DIR} (kubectl.1.27 … kubectl.1.33 come with the machine \
             image); the simulated nodes run the real kubectl"
        );
    }
    fs::create_dir_all(dest).with_context(|| format!("creating {}", dest.display()))?;
    for (_, src) in host {
        let Some(name) = src.file_name() else {
            continue;
        };
        let target = dest.join(name);
        let _ = fs::remove_file(&target);
        if fs::hard_link(&src, &target).is_err() {
            fs::copy(&src, &target)
                .with_context(|| format!("copying {} to {}", src.display(), target.display()))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn avail(minors: &[u32]) -> Vec<(u32, PathBuf)> {
        minors
            .iter()
            .map(|m| (*m, PathBuf::from(format!("kubectl.1.{m}"))))
            .collect()
    }

    #[test]
    fn the_closest_minor_wins_and_a_tie_takes_the_newer() {
        let a = avail(&[27, 28, 29, 30, 31, 32, 33]);
        assert_eq!(closest(37, &a), Some(Path::new("kubectl.1.33")));
        assert_eq!(closest(31, &a), Some(Path::new("kubectl.1.31")));
        assert_eq!(closest(20, &a), Some(Path::new("kubectl.1.27")));
        let gap = avail(&[30, 32]);
        assert_eq!(closest(31, &gap), Some(Path::new("kubectl.1.32")));
        assert_eq!(closest(31, &[]), None);
    }

    #[test]
    fn only_versioned_kubectls_count() {
        assert_eq!(minor_of("kubectl.1.33"), Some(33));
        assert_eq!(minor_of("kubectl"), None);
        assert_eq!(minor_of("kubectl.1."), None);
        assert_eq!(minor_of("kubectl.1.3x"), None);
        assert_eq!(minor_of("kubectl.2.1"), None);
    }
}
