//! Kubernetes versions as the simulator needs them: parse `v1.34.2` (or
//! `1.34.2`), compare, and name the sysext image that carries a version.
//! Kept tiny on purpose: the simulator must not depend on fleetctl's own
//! version type, or a bug there would hide in both.

use std::fmt;

use anyhow::{Result, bail};

/// A full `vMAJOR.MINOR.PATCH` version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

/// A `vMAJOR.MINOR` series.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Minor {
    pub major: u32,
    pub minor: u32,
}

fn numbers(text: &str, what: &str, count: usize) -> Result<Vec<u32>> {
    let bare = text.trim().strip_prefix('v').unwrap_or(text.trim());
    let parts: Vec<&str> = bare.split('.').collect();
    if parts.len() != count {
        bail!(
            "`{text}` is not a {what} (expected e.g. {})",
            example(count)
        );
    }
    parts
        .iter()
        .map(|p| {
            if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
                bail!(
                    "`{text}` is not a {what} (expected e.g. {})",
                    example(count)
                );
            }
            p.parse::<u32>()
                .map_err(|_| anyhow::anyhow!("`{text}`: number `{p}` is too large"))
        })
        .collect()
}

fn example(count: usize) -> &'static str {
    if count == 3 { "v1.34.2" } else { "v1.34" }
}

impl Version {
    pub fn parse(text: &str) -> Result<Version> {
        let n = numbers(text, "Kubernetes version", 3)?;
        Ok(Version {
            major: n[0],
            minor: n[1],
            patch: n[2],
        })
    }

    pub fn minor_series(&self) -> Minor {
        Minor {
            major: self.major,
            minor: self.minor,
        }
    }

    /// The sysext image file name sysext-bakery publishes for this version.
    pub fn image_name(&self) -> String {
        format!("kubernetes-{self}-x86-64.raw")
    }

    /// The version carried in an image file name such as
    /// `kubernetes-v1.34.2-x86-64.raw`, or `None` for any other name.
    pub fn from_image_name(name: &str) -> Option<Version> {
        let v = name
            .strip_prefix("kubernetes-")?
            .strip_suffix("-x86-64.raw")?;
        if !v.starts_with('v') {
            return None;
        }
        Version::parse(v).ok()
    }
}

impl Minor {
    pub fn parse(text: &str) -> Result<Minor> {
        let n = numbers(text, "Kubernetes minor version", 2)?;
        Ok(Minor {
            major: n[0],
            minor: n[1],
        })
    }

    pub fn with_patch(&self, patch: u32) -> Version {
        Version {
            major: self.major,
            minor: self.minor,
            patch,
        }
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v{}.{}.{}", self.major, self.minor, self.patch)
    }
}

impl fmt::Display for Minor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v{}.{}", self.major, self.minor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_with_and_without_v() {
        assert_eq!(Version::parse("v1.34.2").unwrap().to_string(), "v1.34.2");
        assert_eq!(Version::parse("1.34.10").unwrap().patch, 10);
        assert_eq!(Minor::parse("v1.37").unwrap().to_string(), "v1.37");
    }

    #[test]
    fn rejects_garbage() {
        for bad in ["", "v1.34", "v1.34.x", "v1..2", "1.34.2.1", "v-1.2.3"] {
            assert!(Version::parse(bad).is_err(), "{bad}");
        }
        assert!(Minor::parse("v1.34.2").is_err());
    }

    #[test]
    fn orders_numerically() {
        assert!(Version::parse("v1.34.10").unwrap() > Version::parse("v1.34.9").unwrap());
        assert!(Version::parse("v1.35.0").unwrap() > Version::parse("v1.34.9").unwrap());
    }

    #[test]
    fn image_names_round_trip() {
        let v = Version::parse("v1.36.1").unwrap();
        assert_eq!(v.image_name(), "kubernetes-v1.36.1-x86-64.raw");
        assert_eq!(Version::from_image_name(&v.image_name()), Some(v));
        assert_eq!(
            Version::from_image_name("kubernetes-1.36.1-x86-64.raw"),
            None
        );
        assert_eq!(
            Version::from_image_name("containerd-v1.7.0-x86-64.raw"),
            None
        );
    }
}
