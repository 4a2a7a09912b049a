//! The settings fleetctl has one of for the whole fleet (the versions, the
//! hub, the bastion and host-key options, fleetctl's own keys): each must be
//! set on every node and agree, or the two hosts that differ are named.

use std::path::Path;

use super::super::super::{
    DEFAULT_HUB, HealthCheck, HostKeyChecking, KuredRef, Role, SshDefaults, validate,
};
use super::super::{Host, Var, ssh_args};
use super::Build;
use crate::version::Minor;

/// What must be the same for every node (fleetctl has one value of each).
pub(super) struct Shared {
    pub(super) kubernetes_version: Minor,
    pub(super) containerd_version: Option<Minor>,
    pub(super) hub: String,
    pub(super) ssh: SshDefaults,
    pub(super) health_checks: Vec<HealthCheck>,
    pub(super) kured: Option<KuredRef>,
    pub(super) window: Option<crate::pacing::Window>,
}

impl Build {
    /// The fleet-wide settings: each the same on every node.
    pub(super) fn shared(
        &mut self,
        fleet: &[(&Host, Role, String)],
        path: &Path,
    ) -> Option<Shared> {
        let kubernetes_version = match self.same(fleet, "kubernetes_version") {
            Some((h, v)) => self.minor(h, "kubernetes_version", v),
            None => {
                self.problems.push(format!(
                    "{}: no host has kubernetes_version: set it (e.g. in group_vars/all.yml) \
                     to the minor the fleet should run, as `v1.37` or `1.37.2`",
                    path.display()
                ));
                None
            }
        };
        let containerd_version = match self.same(fleet, "containerd_version") {
            Some((h, v)) => self.minor(h, "containerd_version", v).map(Some),
            None => Some(None),
        };
        let hub = match self.same(fleet, "fleetctl_hub") {
            Some((h, v)) => {
                let s = self.string(h, "fleetctl_hub", v)?;
                self.check(h, "fleetctl_hub", v, validate::hub(&s))
            }
            None => Some(DEFAULT_HUB.to_string()),
        };
        let ssh = self.ssh(fleet);
        let health_checks = match self.same(fleet, "fleetctl_health_checks") {
            Some((h, v)) => {
                let checks: Result<Vec<HealthCheck>, String> =
                    serde_json::from_value::<Vec<RawCheck>>(v.value.clone())
                        .map_err(|e| format!("expected a list of {{name, command, expect}}: {e}"))
                        .and_then(|c| c.into_iter().map(RawCheck::into_check).collect());
                self.check(h, "fleetctl_health_checks", v, checks)
            }
            None => Some(Vec::new()),
        };
        let kured = match self.same(fleet, "fleetctl_kured") {
            Some((h, v)) => {
                let s = self.string(h, "fleetctl_kured", v)?;
                self.check(h, "fleetctl_kured", v, s.parse::<KuredRef>())
                    .map(Some)
            }
            None => Some(None),
        };
        let window = match self.same(fleet, "fleetctl_window") {
            Some((h, v)) => {
                let s = self.string(h, "fleetctl_window", v)?;
                let w = crate::pacing::Window::parse(&s).map_err(|e| e.to_string());
                self.check(h, "fleetctl_window", v, w).map(Some)
            }
            None => Some(None),
        };
        Some(Shared {
            kubernetes_version: kubernetes_version?,
            containerd_version: containerd_version?,
            hub: hub?,
            ssh: ssh?,
            health_checks: health_checks?,
            kured: kured?,
            window: window?,
        })
    }

    fn ssh(&mut self, fleet: &[(&Host, Role, String)]) -> Option<SshDefaults> {
        let args = match self.same(fleet, "ansible_ssh_common_args") {
            Some((h, v)) => {
                let s = self.string(h, "ansible_ssh_common_args", v)?;
                self.check(h, "ansible_ssh_common_args", v, ssh_args::parse(&s))?
            }
            None => ssh_args::SshArgs::default(),
        };
        let mut host_key_checking = args.host_key_checking;
        let mut known_hosts = args.known_hosts;
        if let Some((h, v)) = self.same(fleet, "fleetctl_host_key_checking") {
            let s = self.string(h, "fleetctl_host_key_checking", v)?;
            host_key_checking = Some(self.check(
                h,
                "fleetctl_host_key_checking",
                v,
                validate::host_key_checking(&s),
            )?);
        }
        if let Some((h, v)) = self.same(fleet, "fleetctl_known_hosts") {
            known_hosts = Some(self.string(h, "fleetctl_known_hosts", v)?);
        }
        let known_hosts = match known_hosts {
            Some(k) => match validate::local_path(&k, &self.base, self.home.as_deref()) {
                Ok(p) => p,
                Err(e) => {
                    self.problems.push(format!("known_hosts: {e}"));
                    return None;
                }
            },
            None => match &self.home {
                Some(home) => home.join(".ssh/known_hosts"),
                None => {
                    self.problems.push(
                        "HOME is not set, so the default ~/.ssh/known_hosts cannot be found: \
                         set fleetctl_known_hosts"
                            .into(),
                    );
                    return None;
                }
            },
        };
        Some(SshDefaults {
            // Per node in Ansible: each node carries its own.
            user: None,
            port: None,
            identity_file: None,
            known_hosts,
            host_key_checking: host_key_checking.unwrap_or(HostKeyChecking::Strict),
            jump: args.jump,
        })
    }

    /// The one value of a fleet-wide variable, or a problem naming two hosts
    /// that differ. `None` when no host sets it.
    fn same<'h>(
        &mut self,
        fleet: &[(&'h Host, Role, String)],
        key: &str,
    ) -> Option<(&'h Host, &'h Var)> {
        let mut set = fleet
            .iter()
            .filter_map(|(h, _, _)| h.vars.get(key).map(|v| (*h, v)));
        let first = set.next()?;
        for (h, v) in set {
            if v.value != first.1.value {
                self.problems.push(format!(
                    "{}: host `{}`: {key} differs from host `{}`'s ({}): fleetctl has one {key} \
                     for the whole fleet",
                    v.at, h.name, first.0.name, first.1.at
                ));
                return None;
            }
        }
        if fleet.iter().any(|(h, _, _)| !h.vars.contains_key(key))
            && key != "ansible_ssh_common_args"
        {
            let missing: Vec<&str> = fleet
                .iter()
                .filter(|(h, _, _)| !h.vars.contains_key(key))
                .map(|(h, _, _)| h.name.as_str())
                .take(3)
                .collect();
            self.problems.push(format!(
                "{}: {key} is set for host `{}` but not for {}: set it for the whole fleet \
                 (group_vars/all.yml)",
                first.1.at,
                first.0.name,
                missing.join(", ")
            ));
            return None;
        }
        Some(first)
    }

    fn minor(&mut self, h: &Host, key: &str, v: &Var) -> Option<Minor> {
        let s = match &v.value {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Number(n) => {
                return self.refuse(
                    h,
                    key,
                    v,
                    &format!(
                        "{n} is a number to YAML, which drops trailing zeros (1.30 reads as \
                         1.3): write the version quoted, e.g. \"v1.30\""
                    ),
                );
            }
            _ => return self.refuse(h, key, v, "expected a version such as v1.37 or 1.37.2"),
        };
        self.string(h, key, v)?;
        let bare = s.trim().trim_start_matches('v');
        let mut parts = bare.split('.');
        let minor = match (parts.next(), parts.next()) {
            (Some(a), Some(b)) => format!("v{a}.{b}"),
            _ => s.clone(),
        };
        let parsed = minor.parse::<Minor>().map_err(|e| format!("{e:#}"));
        let m = self.check(h, key, v, parsed)?;
        self.note("fleet", key, &m.to_string(), &format!("{key} ({})", v.at));
        Some(m)
    }
}

/// A health check as written in `fleetctl_health_checks`.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCheck {
    name: String,
    command: String,
    expect: String,
}

impl RawCheck {
    /// As fleetctl's own `health_checks`: no field empty (an empty `expect`
    /// is in every output, so the check could never fail).
    fn into_check(self) -> Result<HealthCheck, String> {
        for (key, value) in [
            ("name", &self.name),
            ("command", &self.command),
            ("expect", &self.expect),
        ] {
            if value.trim().is_empty() {
                return Err(format!("health check `{}`: {key} is empty", self.name));
            }
        }
        Ok(HealthCheck {
            name: self.name,
            command: self.command,
            expect: self.expect,
        })
    }
}
