//! Kubernetes versions as fleetctl reasons about them.
//!
//! Two shapes matter: a *minor series* (`v1.37`), which is what sysupdate
//! configs pin and what kubeadm upgrades one step at a time, and a *full
//! version* (`v1.37.2`), which is what a node runs or has staged.

use std::fmt;
use std::str::FromStr;

use anyhow::{Context, bail};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A minor series such as `v1.37`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Minor {
    pub major: u64,
    pub minor: u64,
}

impl Minor {
    pub const fn new(major: u64, minor: u64) -> Self {
        Minor { major, minor }
    }

    /// The series after this one (`v1.37` → `v1.38`).
    pub fn next(self) -> Minor {
        Minor::new(self.major, self.minor + 1)
    }

    /// The full version `vMAJOR.MINOR.patch`.
    pub fn with_patch(self, patch: u64) -> Version {
        Version(semver::Version::new(self.major, self.minor, patch))
    }
}

impl fmt::Display for Minor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v{}.{}", self.major, self.minor)
    }
}

impl FromStr for Minor {
    type Err = anyhow::Error;

    /// Accepts `v1.37` and `1.37`.
    fn from_str(s: &str) -> anyhow::Result<Self> {
        let bare = s.strip_prefix('v').unwrap_or(s);
        let mut parts = bare.split('.');
        let (Some(major), Some(minor), None) = (parts.next(), parts.next(), parts.next()) else {
            bail!("`{s}` is not a minor version: expected the form v1.37");
        };
        let parse = |p: &str| -> anyhow::Result<u64> {
            if p.is_empty()
                || !p.bytes().all(|b| b.is_ascii_digit())
                || (p.len() > 1 && p.starts_with('0'))
            {
                bail!("`{s}` is not a minor version: expected the form v1.37");
            }
            p.parse::<u64>()
                .with_context(|| format!("`{s}`: number too large"))
        };
        Ok(Minor::new(parse(major)?, parse(minor)?))
    }
}

/// A full release version such as `v1.37.2`. Pre-releases are kept as
/// semver orders them, but fleetctl never stages one on its own.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version(pub semver::Version);

impl Version {
    pub const fn new(major: u64, minor: u64, patch: u64) -> Self {
        Version(semver::Version::new(major, minor, patch))
    }

    pub fn minor(&self) -> Minor {
        Minor::new(self.0.major, self.0.minor)
    }

    pub fn patch(&self) -> u64 {
        self.0.patch
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v{}", self.0)
    }
}

impl FromStr for Version {
    type Err = anyhow::Error;

    /// Accepts `v1.37.2` and `1.37.2`.
    fn from_str(s: &str) -> anyhow::Result<Self> {
        let bare = s.strip_prefix('v').unwrap_or(s);
        let v = semver::Version::parse(bare)
            .with_context(|| format!("`{s}` is not a version: expected the form v1.37.2"))?;
        Ok(Version(v))
    }
}

/// What the operator asks for: a minor series, or one exact version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetVersion {
    Minor(Minor),
    Exact(Version),
}

impl TargetVersion {
    pub fn minor(&self) -> Minor {
        match self {
            TargetVersion::Minor(m) => *m,
            TargetVersion::Exact(v) => v.minor(),
        }
    }
}

impl fmt::Display for TargetVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TargetVersion::Minor(m) => m.fmt(f),
            TargetVersion::Exact(v) => v.fmt(f),
        }
    }
}

impl FromStr for TargetVersion {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> anyhow::Result<Self> {
        let dots = s.matches('.').count();
        match dots {
            1 => Ok(TargetVersion::Minor(s.parse()?)),
            2 => Ok(TargetVersion::Exact(s.parse()?)),
            _ => bail!("`{s}` is not a Kubernetes version: expected v1.37 or v1.37.2"),
        }
    }
}

macro_rules! string_serde {
    ($t:ty) => {
        impl Serialize for $t {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                s.parse()
                    .map_err(|e: anyhow::Error| serde::de::Error::custom(format!("{e:#}")))
            }
        }
    };
}
string_serde!(Minor);
string_serde!(Version);
string_serde!(TargetVersion);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_minor_with_and_without_v() {
        assert_eq!("v1.37".parse::<Minor>().unwrap(), Minor::new(1, 37));
        assert_eq!("1.37".parse::<Minor>().unwrap(), Minor::new(1, 37));
        for bad in ["", "v1", "1.37.2", "v1.x", "v1.037", "1..3", "v-1.3"] {
            assert!(bad.parse::<Minor>().is_err(), "{bad} should be refused");
        }
    }

    #[test]
    fn target_distinguishes_series_from_exact() {
        assert_eq!(
            "v1.37".parse::<TargetVersion>().unwrap(),
            TargetVersion::Minor(Minor::new(1, 37))
        );
        assert_eq!(
            "1.37.2".parse::<TargetVersion>().unwrap(),
            TargetVersion::Exact(Version::new(1, 37, 2))
        );
        assert!("v1".parse::<TargetVersion>().is_err());
        assert_eq!(Version::new(1, 37, 2).to_string(), "v1.37.2");
        assert_eq!(Minor::new(1, 37).next().to_string(), "v1.38");
    }
}
