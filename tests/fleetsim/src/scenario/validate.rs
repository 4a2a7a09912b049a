//! Checking a scenario before anything is written: every error names the
//! field (and the node) it is about.

use std::collections::BTreeSet;

use anyhow::{Result, bail};

use super::*;

impl Scenario {
    pub fn validate(&self) -> Result<()> {
        self.validate_nodes()?;
        self.validate_timing()?;
        self.hub.versions().context("scenario `hub`")?;
        for c in &self.hub.containerd {
            crate::containerd::check_version(c).context("scenario `hub.containerd`")?;
        }
        self.validate_faults()?;
        self.validate_workloads()?;
        if let Some(k) = self.kured.spec() {
            k.validate().context("scenario `kured`")?;
        }
        self.cluster_version()?;
        self.validate_control_plane_args()?;
        if let Some(tag) = &self.etcd {
            if crate::etcd_pod::tag::parse(tag).is_none() {
                bail!("scenario `etcd`: `{tag}` is not an etcd image tag like 3.6.4-0");
            }
            if !self.external_etcd.is_empty() {
                bail!("scenario `etcd` names the stacked etcd's image; `external_etcd` has none");
            }
        }
        if self.os_layer == Os::Systemd && self.light {
            bail!(
                "scenario `os_layer: systemd` and `light: true` exclude each other (light nodes have no processes to run under systemd)"
            );
        }
        if self.os_layer == Os::Systemd
            && let Some(n) = self.nodes.iter().find(|n| n.cgroup_v1)
        {
            bail!(
                "node {}: `cgroup_v1` needs `os_layer: emulated` (a real-OS node's init mounts the cgroup2 hierarchy only)",
                n.name
            );
        }
        if self.os_layer != Os::Systemd
            && let Some(n) = self.nodes.iter().find(|n| n.sysupdate_timer)
        {
            bail!(
                "node {}: `sysupdate_timer` needs `os_layer: systemd` (the emulated layer has no timers)",
                n.name
            );
        }
        Ok(())
    }

    /// The ClusterConfiguration sections kubeadm has, flags as a flag is
    /// spelled, values on one line: they are written into kubeadm-config.
    fn validate_control_plane_args(&self) -> Result<()> {
        for (component, args) in &self.control_plane_args {
            if !["apiServer", "controllerManager", "scheduler"].contains(&component.as_str()) {
                bail!(
                    "scenario `control_plane_args`: `{component}` is not apiServer, controllerManager or scheduler"
                );
            }
            for (flag, value) in args {
                let flag_ok = !flag.is_empty()
                    && flag
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
                if !flag_ok || value.chars().any(char::is_control) {
                    bail!(
                        "scenario `control_plane_args.{component}`: `{flag}` must be a flag name (a-z, 0-9, -) with a one-line value"
                    );
                }
            }
        }
        Ok(())
    }

    fn validate_nodes(&self) -> Result<()> {
        if self.nodes.is_empty() {
            bail!("the scenario has no nodes");
        }
        if self.nodes.len() > MAX_NODES {
            bail!(
                "the scenario has {} nodes; a fleet has at most {MAX_NODES}",
                self.nodes.len()
            );
        }
        if !self.nodes.iter().any(|n| n.role == Role::ControlPlane) {
            bail!("the scenario has no control-plane node (set `role: control-plane` on one)");
        }
        let mut seen = BTreeSet::new();
        for n in &self.nodes {
            if !seen.insert(n.name.as_str()) {
                bail!("node name {} appears twice", n.name);
            }
            self.validate_node(n)?;
        }
        Ok(())
    }

    fn validate_node(&self, n: &NodeSpec) -> Result<()> {
        check_hostname(&n.name)?;
        if let Some(u) = &n.user
            && u != "root"
            && u != "core"
        {
            bail!(
                "node {}: user `{u}` does not exist on Flatcar nodes here (root or core)",
                n.name
            );
        }
        self.running(n)?;
        self.staged(n)?;
        self.images(n)?;
        for m in &n.extra_configs {
            Minor::parse(m).with_context(|| format!("node {}: extra_configs", n.name))?;
        }
        check_os_version(&self.os(n)).with_context(|| format!("node {}: os", n.name))?;
        if let Some(c) = self.containerd(n) {
            crate::containerd::check_version(&c)
                .with_context(|| format!("node {}: containerd", n.name))?;
        }
        if let Some(u) = &n.os_update {
            check_os_version(u).with_context(|| format!("node {}: os_update", n.name))?;
        }
        Ok(())
    }

    fn validate_timing(&self) -> Result<()> {
        for (what, v) in [
            ("boot_delay", self.boot_delay),
            ("kubelet_delay", self.kubelet_delay),
            ("api_delay", self.api_delay),
            ("api_latency", self.api_latency),
            ("kubeadm_duration", self.kubeadm_duration),
        ] {
            if !v.is_finite() || v < 0.0 {
                bail!("scenario `{what}` must be a number of seconds ≥ 0, not {v}");
            }
        }
        // Restart=always with no delay would be a node spinning on a crash.
        if !self.kubelet_restart.is_finite() || self.kubelet_restart < 0.05 {
            bail!(
                "scenario `kubelet_restart` must be at least 0.05 seconds, not {}",
                self.kubelet_restart
            );
        }
        if self.port == 0 {
            bail!("scenario `port` must not be 0");
        }
        Ok(())
    }

    fn validate_workloads(&self) -> Result<()> {
        for d in &self.deprecated_apis {
            for n in &d.served_by {
                if !self
                    .nodes
                    .iter()
                    .any(|s| &s.name == n && s.role == Role::ControlPlane)
                {
                    bail!(
                        "scenario `deprecated_apis`: {}/{} {} is served_by {n}, which is not a \
                         control plane of the scenario",
                        d.group,
                        d.version,
                        d.resource
                    );
                }
            }
        }
        for p in &self.pods {
            if !self.nodes.iter().any(|n| n.name == p.node) {
                bail!(
                    "scenario `pods`: {}/{} is on node {}, which the scenario does not have",
                    p.namespace,
                    p.name,
                    p.node
                );
            }
            if !["Running", "Succeeded", "Failed", "Pending"].contains(&p.phase.as_str()) {
                bail!(
                    "scenario `pods`: {}/{} has phase `{}` (Running, Succeeded, Failed or Pending)",
                    p.namespace,
                    p.name,
                    p.phase
                );
            }
            if let Some(o) = &p.owner
                && !o
                    .split_once('/')
                    .is_some_and(|(k, n)| !k.is_empty() && !n.is_empty())
            {
                bail!(
                    "scenario `pods`: {}/{} has owner `{o}`, not KIND/NAME",
                    p.namespace,
                    p.name
                );
            }
        }
        for b in &self.pdbs {
            let what = format!("scenario `pdbs`: {}/{}", b.namespace, b.name);
            match (&b.min_available, &b.max_unavailable) {
                (Some(v), None) | (None, Some(v)) => {
                    if crate::tools::int_or_percent(v).is_none() {
                        bail!("{what}: `{v}` is neither an integer nor a percentage");
                    }
                }
                _ => bail!("{what} needs exactly one of min_available and max_unavailable"),
            }
            for r in &b.match_expressions {
                if !["In", "NotIn", "Exists", "DoesNotExist"].contains(&r.operator.as_str()) {
                    bail!(
                        "{what}: operator `{}` (In, NotIn, Exists or DoesNotExist)",
                        r.operator
                    );
                }
            }
        }
        if !(self.cert_expiry_days.is_finite()) {
            bail!("scenario `cert_expiry_days` must be a number of days");
        }
        Ok(())
    }

    fn validate_faults(&self) -> Result<()> {
        let f = &self.faults;
        let named = f
            .hang_on_reboot
            .iter()
            .chain(&f.pdb_block)
            .chain(&f.fail_upgrade_node)
            .chain(&f.drop_ssh_during_upgrade_apply)
            .chain(f.slow_boot.keys());
        for name in named {
            if !self.nodes.iter().any(|n| &n.name == name) {
                bail!("scenario `faults` names node {name}, which the scenario does not have");
            }
        }
        if let Some((n, s)) = f
            .slow_boot
            .iter()
            .find(|(_, s)| !s.is_finite() || **s < 0.0)
        {
            bail!("scenario `faults.slow_boot` for {n} must be seconds ≥ 0, not {s}");
        }
        Ok(())
    }
}

fn check_hostname(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && !name.starts_with('-')
        && !name.ends_with('-')
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if !ok {
        bail!(
            "node name `{name}` is not a valid hostname (lowercase letters, digits and `-`, at most 63)"
        );
    }
    Ok(())
}

fn check_os_version(v: &str) -> Result<()> {
    let parts: Vec<&str> = v.split('.').collect();
    if parts.len() != 3
        || parts
            .iter()
            .any(|p| p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()))
    {
        bail!("`{v}` is not a Flatcar version (expected e.g. 4081.2.0)");
    }
    Ok(())
}
