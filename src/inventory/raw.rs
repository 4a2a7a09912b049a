//! The inventory exactly as written in YAML, before any validation.
//!
//! Every value a later check may refuse is kept as `Spanned<String>` (or
//! `Spanned<u16>`) so the refusal can name the file, line and column the
//! operator has to edit. Unknown keys are refused here, by serde, with the
//! parser's own location.

use serde::Deserialize;
use serde_saphyr::Spanned;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawInventory {
    pub kubernetes_version: Spanned<String>,
    #[serde(default)]
    pub containerd_version: Option<Spanned<String>>,
    #[serde(default)]
    pub sysupdate: Option<RawSysupdate>,
    #[serde(default)]
    pub ssh: Option<RawSsh>,
    #[serde(default)]
    pub health_checks: Option<Vec<RawHealthCheck>>,
    #[serde(default)]
    pub kured: Option<Spanned<String>>,
    #[serde(default)]
    pub window: Option<Spanned<String>>,
    pub nodes: Spanned<Vec<RawNode>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSysupdate {
    #[serde(default)]
    pub hub: Option<Spanned<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSsh {
    #[serde(default)]
    pub user: Option<Spanned<String>>,
    #[serde(default)]
    pub port: Option<Spanned<u16>>,
    #[serde(default)]
    pub identity_file: Option<Spanned<String>>,
    #[serde(default)]
    pub known_hosts: Option<Spanned<String>>,
    #[serde(default)]
    pub host_key_checking: Option<Spanned<String>>,
    #[serde(default)]
    pub jump: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHealthCheck {
    pub name: Spanned<String>,
    pub command: Spanned<String>,
    pub expect: Spanned<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawNode {
    pub name: Spanned<String>,
    pub address: Spanned<String>,
    pub role: Spanned<String>,
    #[serde(default)]
    pub port: Option<Spanned<u16>>,
    #[serde(default)]
    pub user: Option<Spanned<String>>,
    #[serde(default)]
    pub identity_file: Option<Spanned<String>>,
    #[serde(default)]
    pub zone: Option<Spanned<String>>,
}
