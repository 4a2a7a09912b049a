//! Which kubernetes images the extension hub publishes, read from its
//! `SHA256SUMS`. sysupdate always stages the newest patch of the pinned
//! minor, so this list is how the plan knows which patch each hop brings;
//! the hub check reads the same lines with every architecture kept. One
//! parser ([`kubernetes_images`]) for both, below `checks` and `plan`.

use std::collections::BTreeMap;

use crate::version::{Minor, Version};

/// The architecture suffix fleetctl's nodes use in image names.
const ARCH: &str = "x86-64";

/// What the planner knows about the hub.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HubVersions {
    /// Every released kubernetes version on the hub, sorted, no duplicates,
    /// with the sha256 the hub's `SHA256SUMS` gives for its image (missing
    /// when the list gave two different sums for one image).
    Resolved {
        versions: Vec<Version>,
        digests: BTreeMap<Version, String>,
    },
    /// The list could not be read; the plan goes on with patches unresolved.
    Unresolved(String),
}

impl HubVersions {
    /// A resolved list, sorted and deduplicated whatever order it came in.
    pub fn resolved(mut versions: Vec<Version>) -> HubVersions {
        versions.sort();
        versions.dedup();
        HubVersions::Resolved {
            versions,
            digests: BTreeMap::new(),
        }
    }

    /// What a `SHA256SUMS` file says: the versions and their images' sums.
    pub fn from_sha256sums(text: &str) -> HubVersions {
        let mut digests: BTreeMap<Version, Option<String>> = BTreeMap::new();
        for (version, hash) in text.lines().filter_map(image_line) {
            let hash = hash.to_ascii_lowercase();
            digests
                .entry(version)
                .and_modify(|known| {
                    // Two different sums for one file: trust neither.
                    if known.as_ref() != Some(&hash) {
                        *known = None;
                    }
                })
                .or_insert(Some(hash));
        }
        HubVersions::Resolved {
            versions: digests.keys().cloned().collect(),
            digests: digests
                .into_iter()
                .filter_map(|(v, h)| h.map(|h| (v, h)))
                .collect(),
        }
    }

    /// The sha256 the hub publishes for `version`'s image, if it does (once).
    pub fn digest(&self, version: &Version) -> Option<&str> {
        match self {
            HubVersions::Resolved { digests, .. } => digests.get(version).map(String::as_str),
            HubVersions::Unresolved(_) => None,
        }
    }

    /// The patch sysupdate stages for a config pinned to `minor`.
    pub fn newest(&self, minor: Minor) -> Option<&Version> {
        self.versions().iter().filter(|v| v.minor() == minor).max()
    }

    /// What a floating config would stage.
    pub fn newest_overall(&self) -> Option<&Version> {
        self.versions().iter().max()
    }

    /// Every minor series with at least one image.
    pub fn minors(&self) -> Vec<Minor> {
        let mut minors: Vec<Minor> = self.versions().iter().map(|v| v.minor()).collect();
        minors.dedup();
        minors
    }

    pub fn contains(&self, version: &Version) -> bool {
        self.versions().contains(version)
    }

    /// Every version of `minor` on the hub.
    pub fn patches(&self, minor: Minor) -> Vec<Version> {
        self.versions()
            .iter()
            .filter(|v| v.minor() == minor)
            .cloned()
            .collect()
    }

    pub fn is_resolved(&self) -> bool {
        matches!(self, HubVersions::Resolved { .. })
    }

    /// Every released version on the hub; empty when unresolved.
    pub fn versions(&self) -> &[Version] {
        match self {
            HubVersions::Resolved { versions, .. } => versions,
            HubVersions::Unresolved(_) => &[],
        }
    }
}

/// 64 hexadecimal characters: the only digest `sha256sum -c --strict`
/// accepts, and the only one a plan may carry.
pub fn is_sha256(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Where the list lives: `<hub>/kubernetes/SHA256SUMS`.
pub fn sha256sums_url(hub: &str) -> String {
    format!("{}/kubernetes/SHA256SUMS", hub.trim_end_matches('/'))
}

/// The released kubernetes versions named in a `SHA256SUMS` file
/// (`<hex>  kubernetes-v1.37.2-x86-64.raw`, or `<hex> *name` in binary
/// mode). Other components, other architectures, pre-releases and lines
/// that are not checksums are skipped: sysupdate never picks them for a
/// pinned x86-64 node either.
pub fn parse_sha256sums(text: &str) -> Vec<Version> {
    let mut versions: Vec<Version> = text
        .lines()
        .filter_map(image_line)
        .map(|(v, _)| v)
        .collect();
    versions.sort();
    versions.dedup();
    versions
}

/// One `SHA256SUMS` line of a released x86-64 kubernetes image: its version and sum.
fn image_line(line: &str) -> Option<(Version, &str)> {
    let image = sums_line(line)?;
    (image.arch == ARCH && is_sha256(image.hash)).then_some((image.version, image.hash))
}

/// A released kubernetes image a `SHA256SUMS` line names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SumsLine<'a> {
    pub version: Version,
    /// systemd's architecture name: `x86-64` or `arm64`.
    pub arch: &'static str,
    /// Hexadecimal; its length is the reader's to check.
    pub hash: &'a str,
}

/// Every released kubernetes image in a `SHA256SUMS` file, in file order,
/// every architecture sysext-bakery builds (`<hex>  kubernetes-v1.37.2-arm64.raw`,
/// or `<hex> *name` in binary mode). Pre-releases, other components and
/// lines that are not checksums are skipped: a pinned sysupdate config
/// never picks them.
pub fn kubernetes_images(text: &str) -> impl Iterator<Item = SumsLine<'_>> {
    text.lines().filter_map(sums_line)
}

fn sums_line(line: &str) -> Option<SumsLine<'_>> {
    let mut fields = line.split_whitespace();
    let (Some(hash), Some(name), None) = (fields.next(), fields.next(), fields.next()) else {
        return None;
    };
    if !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let name = name.strip_prefix('*').unwrap_or(name);
    let rest = name.strip_prefix("kubernetes-v")?.strip_suffix(".raw")?;
    let (version, arch) = ["x86-64", "arm64"]
        .iter()
        .find_map(|a| Some((rest.strip_suffix(a)?.strip_suffix('-')?, *a)))?;
    let version: Version = version.parse().ok()?;
    (version.0.pre.is_empty() && version.0.build.is_empty()).then_some(SumsLine {
        version,
        arch,
        hash,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SUMS: &str = "\
4f1c0a0e5b3e2d1c0f9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a  kubernetes-v1.35.1-x86-64.raw
0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9  kubernetes-v1.35.3-x86-64.raw
1111111111111111111111111111111111111111111111111111111111111111  kubernetes-v1.35.3-arm64.raw
2222222222222222222222222222222222222222222222222222222222222222 *kubernetes-v1.36.0-x86-64.raw
3333333333333333333333333333333333333333333333333333333333333333  kubernetes-v1.37.0-rc.1-x86-64.raw
4444444444444444444444444444444444444444444444444444444444444444  kubernetes-v1.34.10-x86-64.raw
5555555555555555555555555555555555555555555555555555555555555555  containerd-2.1.4-x86-64.raw
6666666666666666666666666666666666666666666666666666666666666666  kubernetes-v1.35.1-x86-64.raw
not a checksum line
7777777777777777777777777777777777777777777777777777777777777777  kubernetes-v1.36.x-x86-64.raw
";

    fn v(s: &str) -> Version {
        s.parse().unwrap()
    }

    #[test]
    fn picks_released_x86_images_sorted_and_deduplicated() {
        assert_eq!(
            parse_sha256sums(SUMS),
            vec![v("v1.34.10"), v("v1.35.1"), v("v1.35.3"), v("v1.36.0")]
        );
    }

    #[test]
    fn newest_patch_per_minor_compares_numerically() {
        let hub = HubVersions::resolved(parse_sha256sums(SUMS));
        assert_eq!(hub.newest(Minor::new(1, 35)), Some(&v("v1.35.3")));
        assert_eq!(hub.newest(Minor::new(1, 34)), Some(&v("v1.34.10")));
        assert_eq!(hub.newest(Minor::new(1, 37)), None);
        assert_eq!(hub.newest_overall(), Some(&v("v1.36.0")));
        assert_eq!(
            hub.minors(),
            vec![Minor::new(1, 34), Minor::new(1, 35), Minor::new(1, 36)]
        );
    }

    #[test]
    fn sums_are_kept_per_image_and_a_contradiction_trusts_neither() {
        let hub = HubVersions::from_sha256sums(SUMS);
        assert_eq!(
            hub.versions(),
            [v("v1.34.10"), v("v1.35.1"), v("v1.35.3"), v("v1.36.0")]
        );
        assert_eq!(
            hub.digest(&v("v1.35.3")),
            Some("0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9")
        );
        // The arm64 image's sum is not the x86-64 one's.
        assert_ne!(
            hub.digest(&v("v1.35.3")),
            Some("1111111111111111111111111111111111111111111111111111111111111111")
        );
        // v1.35.1 is listed twice with different sums.
        assert_eq!(hub.digest(&v("v1.35.1")), None);
        assert!(
            HubVersions::resolved(vec![v("v1.35.3")])
                .digest(&v("v1.35.3"))
                .is_none()
        );
    }

    #[test]
    fn an_unresolved_hub_knows_nothing() {
        let hub = HubVersions::Unresolved("timeout".into());
        assert_eq!(hub.newest(Minor::new(1, 35)), None);
        assert!(hub.minors().is_empty());
        assert!(!hub.is_resolved());
    }

    #[test]
    fn url_has_no_double_slash() {
        assert_eq!(
            sha256sums_url("https://h.example/ext/"),
            "https://h.example/ext/kubernetes/SHA256SUMS"
        );
    }

    #[test]
    fn one_parser_keeps_every_architecture_and_any_hex_for_the_hub_check() {
        let lines: Vec<(String, &str, usize)> = kubernetes_images(SUMS)
            .chain(kubernetes_images(
                "abc  kubernetes-v1.35.4-arm64.raw\nxyz  kubernetes-v1.35.5-arm64.raw",
            ))
            .map(|l| (l.version.to_string(), l.arch, l.hash.len()))
            .collect();
        assert_eq!(
            lines,
            vec![
                ("v1.35.1".to_string(), "x86-64", 64),
                ("v1.35.3".to_string(), "x86-64", 64),
                ("v1.35.3".to_string(), "arm64", 64),
                ("v1.36.0".to_string(), "x86-64", 64),
                ("v1.34.10".to_string(), "x86-64", 64),
                ("v1.35.1".to_string(), "x86-64", 64),
                ("v1.35.4".to_string(), "arm64", 3),
            ]
        );
        // The plan takes only full x86-64 sums of those.
        assert_eq!(
            parse_sha256sums("abc  kubernetes-v1.35.4-x86-64.raw"),
            Vec::<Version>::new()
        );
    }
}
