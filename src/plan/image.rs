//! A hop's kubernetes image as apply may use it: its version and the
//! sha256 the hub's `SHA256SUMS` published for it, always together. The
//! steps that download an image, check one already on a node, or mount one
//! to run its kubeadm take an [`Image`], never a version and an optional
//! sum: there is no way to reach them without a sum to check against, so
//! no path can skip the check (docs/security.md).

use crate::version::Version;

use super::model::Hop;
use crate::hub::is_sha256;

/// A kubernetes image and the one sha256 it must have (64 hexadecimal
/// characters, what `sha256sum -c --strict` accepts).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    version: Version,
    sha256: String,
}

impl Image {
    /// `None` unless `sha256` is 64 hexadecimal characters.
    pub fn new(version: Version, sha256: &str) -> Option<Image> {
        is_sha256(sha256).then(|| Image {
            version,
            sha256: sha256.to_ascii_lowercase(),
        })
    }

    pub fn version(&self) -> &Version {
        &self.version
    }

    pub fn sha256(&self) -> &str {
        &self.sha256
    }
}

impl Hop {
    /// The hop's image with its sum; `None` when the plan lacks either
    /// (the hub unreadable, or giving no single sum): apply refuses such a
    /// hop before it starts (`commands::apply`), and no step can run one.
    pub fn image(&self) -> Option<Image> {
        Image::new(self.version.clone()?, self.sha256.as_deref()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_image_always_carries_a_well_formed_sum() {
        let v: Version = "v1.35.3".parse().unwrap();
        let sum = "AB".repeat(32);
        let image = Image::new(v.clone(), &sum).unwrap();
        assert_eq!(
            (image.version(), image.sha256()),
            (&v, "ab".repeat(32).as_str())
        );
        for bad in [
            "",
            "ab",
            &"g".repeat(64),
            &"a".repeat(65),
            &format!("{} ", "a".repeat(63)),
        ] {
            assert_eq!(Image::new(v.clone(), bad), None, "{bad:?}");
        }
    }
}
