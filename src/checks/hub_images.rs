//! Every image the hop needs is on the hub, for every architecture in the
//! fleet. sysext-bakery publishes one image per version and architecture,
//! `kubernetes-v1.35.2-x86-64.raw` and `kubernetes-v1.35.2-arm64.raw`
//! (systemd's architecture names, the `%a` of the sysupdate
//! `MatchPattern`), listed in the hub's `SHA256SUMS`. `crate::hub`'s
//! `HubVersions` keeps the x86-64 ones only, so this reads the list again
//! (with the same parser, `crate::hub::kubernetes_images`) with the
//! architecture kept.
//!
//! An architecture that lacks the hop's exact patch blocks rather than
//! warns: its nodes' sysupdate would stage another patch (or nothing), and
//! apply refuses a staged version other than the planned one.

use std::collections::BTreeSet;

use super::verdicts::{Check, CheckName, Verdict};
use crate::hub::{HubVersions, kubernetes_images};
use crate::version::{Minor, Version};

/// One published kubernetes image.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct HubImage {
    pub version: Version,
    /// `x86-64` or `arm64`.
    pub arch: String,
}

impl HubImage {
    /// The released kubernetes images named in a `SHA256SUMS` file, every
    /// architecture kept; pre-releases are skipped (sysupdate's pinned
    /// configs never pick them either).
    pub fn parse_sha256sums(text: &str) -> Vec<HubImage> {
        let mut images: Vec<HubImage> = kubernetes_images(text)
            .map(|line| HubImage {
                version: line.version,
                arch: line.arch.to_string(),
            })
            .collect();
        images.sort();
        images.dedup();
        images
    }

    /// The x86-64 images the plan already read; `None` when it could not.
    pub fn from_hub_versions(hub: &HubVersions) -> Option<Vec<HubImage>> {
        match hub {
            HubVersions::Resolved { versions, .. } => Some(
                versions
                    .iter()
                    .map(|v| HubImage {
                        version: v.clone(),
                        arch: "x86-64".into(),
                    })
                    .collect(),
            ),
            HubVersions::Unresolved(_) => None,
        }
    }
}

/// sysext-bakery's file name for an image.
pub fn image_name(version: &Version, arch: &str) -> String {
    format!("kubernetes-{version}-{arch}.raw")
}

/// systemd's architecture name for what a node reports (`uname -m`,
/// Go's `GOARCH`, or already systemd's); `None` for one the bakery does not build.
fn systemd_arch(arch: &str) -> Option<&'static str> {
    match arch {
        "x86-64" | "x86_64" | "amd64" => Some("x86-64"),
        "arm64" | "aarch64" => Some("arm64"),
        _ => None,
    }
}

/// The verdict for a hop to `minor` that stages `version` (the newest x86-64
/// patch the plan resolved; `None` when unresolved, then the newest patch of
/// each architecture is what would come). `images` is `None` when the hub
/// could not be read. `arches` are the nodes' architectures, in any of the
/// spellings [`systemd_arch`] knows.
pub fn check_hub(
    images: Option<&[HubImage]>,
    minor: Minor,
    version: Option<&Version>,
    arches: &[String],
) -> Check {
    let Some(images) = images else {
        return Check {
            name: CheckName::Hub,
            verdict: Verdict::Warn,
            summary: "the hub's image list could not be read, so its images are unchecked".into(),
            details: vec![
                "apply checks each image against the sha256 the saved plan recorded, and does not \
                 start a hop whose image has none"
                    .into(),
            ],
            remedy: Some(
                "check the hub address in the inventory and that it serves kubernetes/SHA256SUMS"
                    .into(),
            ),
        };
    };
    let mut problems = Vec::new();
    let mut wanted: BTreeSet<&'static str> = BTreeSet::new();
    for arch in arches {
        match systemd_arch(arch) {
            Some(a) => {
                wanted.insert(a);
            }
            None => problems.push(format!(
                "architecture {arch}: sysext-bakery builds no kubernetes image for it"
            )),
        }
    }
    for arch in wanted {
        let patches: Vec<&Version> = images
            .iter()
            .filter(|i| i.arch == arch && i.version.minor() == minor)
            .map(|i| &i.version)
            .collect();
        let present = match version {
            Some(v) => patches.contains(&v),
            None => !patches.is_empty(),
        };
        if present {
            continue;
        }
        let wanted_name = match version {
            Some(v) => image_name(v, arch),
            None => format!("any kubernetes {minor} image for {arch}"),
        };
        let has = match patches.iter().max() {
            Some(newest) => format!("its newest {minor} for {arch} is {newest}"),
            None => format!("it has no {minor} image for {arch}"),
        };
        problems.push(format!("{wanted_name} is not on the hub; {has}"));
    }
    if problems.is_empty() {
        let what = version.map_or_else(|| format!("a {minor} image"), Version::to_string);
        return Check::pass(
            CheckName::Hub,
            format!("the hub has {what} for every architecture in the fleet"),
        );
    }
    Check {
        name: CheckName::Hub,
        verdict: Verdict::Block,
        summary: format!("the hub lacks an image the {minor} hop needs"),
        details: problems,
        remedy: Some(
            "wait until the hub publishes it for every architecture (sysext-bakery builds them \
             in one release), or pick a target whose images are all there"
                .into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/checks/fixtures/");
        std::fs::read_to_string(format!("{path}{name}")).expect("fixture exists")
    }

    fn v(s: &str) -> Version {
        s.parse().unwrap()
    }

    fn arches(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn reads_every_architecture_from_sha256sums() {
        let images = HubImage::parse_sha256sums(&fixture("hub-SHA256SUMS"));
        let names: Vec<String> = images
            .iter()
            .map(|i| image_name(&i.version, &i.arch))
            .collect();
        assert_eq!(
            names,
            [
                "kubernetes-v1.34.3-arm64.raw",
                "kubernetes-v1.34.3-x86-64.raw",
                "kubernetes-v1.35.1-arm64.raw",
                "kubernetes-v1.35.1-x86-64.raw",
                "kubernetes-v1.35.2-x86-64.raw",
            ],
            "other components and the release candidate are skipped"
        );
    }

    #[test]
    fn passes_when_every_architecture_has_the_patch() {
        let images = HubImage::parse_sha256sums(&fixture("hub-SHA256SUMS"));
        let check = check_hub(
            Some(&images),
            Minor::new(1, 34),
            Some(&v("v1.34.3")),
            &arches(&["x86_64", "aarch64"]),
        );
        assert_eq!(check.verdict, Verdict::Pass, "{check:?}");
        let x86 = check_hub(
            Some(&images),
            Minor::new(1, 35),
            Some(&v("v1.35.2")),
            &arches(&["x86-64"]),
        );
        assert_eq!(x86.verdict, Verdict::Pass);
    }

    #[test]
    fn blocks_when_an_architecture_lags_or_lacks_the_minor() {
        let images = HubImage::parse_sha256sums(&fixture("hub-SHA256SUMS"));
        let lag = check_hub(
            Some(&images),
            Minor::new(1, 35),
            Some(&v("v1.35.2")),
            &arches(&["x86-64", "arm64"]),
        );
        assert_eq!(lag.verdict, Verdict::Block);
        assert_eq!(
            lag.details,
            [
                "kubernetes-v1.35.2-arm64.raw is not on the hub; its newest v1.35 for arm64 is v1.35.1"
            ]
        );
        let none = check_hub(
            Some(&images),
            Minor::new(1, 36),
            None,
            &arches(&["arm64", "riscv64"]),
        );
        assert_eq!(
            none.details,
            [
                "architecture riscv64: sysext-bakery builds no kubernetes image for it",
                "any kubernetes v1.36 image for arm64 is not on the hub; it has no v1.36 image for arm64",
            ]
        );
    }

    #[test]
    fn an_unreadable_hub_warns_and_plan_hub_versions_convert() {
        let check = check_hub(None, Minor::new(1, 35), None, &arches(&["x86-64"]));
        assert_eq!(check.verdict, Verdict::Warn);
        let resolved = HubVersions::resolved(vec![v("v1.35.2")]);
        let images = HubImage::from_hub_versions(&resolved).unwrap();
        assert_eq!(
            images,
            [HubImage {
                version: v("v1.35.2"),
                arch: "x86-64".into()
            }]
        );
        assert_eq!(
            HubImage::from_hub_versions(&HubVersions::Unresolved("x".into())),
            None
        );
    }
}
