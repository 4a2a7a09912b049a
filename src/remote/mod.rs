//! Every command fleetctl runs on a node, in one place, so a reviewer can
//! read exactly what will happen on a machine without reading the rest of
//! the program.
//!
//! The scripts are plain POSIX `sh` kept in `.sh` files beside this one and
//! compiled in. The SSH layer runs them as root (`exec_root`); they never
//! fail as a whole: each probe reports its own output, stderr and exit
//! status in a delimited section (see `prelude.sh`), and the pure parsers in
//! `crate::node` turn that into facts.
//!
//! The read-only probes (the scripts), what apply asks the API server
//! ([`kubectl`]: the lock, cordon and drain, readiness, static pods) and
//! what it runs on the node being upgraded ([`upgrade`]).

/// The node's clock, `SECONDS.NANOSECONDS` since the epoch (GNU `date`, as
/// on Flatcar): the lock is written in the cluster's time
/// (`crate::steps::lock::clock`). Read-only, no root needed.
pub const CLOCK: &str = "date -u +%s.%N";

/// When the node's init started, as three numbers: `/proc/stat`'s btime,
/// PID 1's start time in clock ticks after it (field 22 of
/// `/proc/1/stat`, counted after the command name, which may hold spaces),
/// and the ticks per second. Read-only. Parse with
/// `crate::node::parse_boot_time`.
pub const BOOT_TIME: &str = "awk '/^btime/ {print $2}' /proc/stat; \
     sed 's/.*) //' /proc/1/stat | awk '{print $20}'; getconf CLK_TCK";

/// Gathers one node's facts: OS and update_engine state, running and staged
/// Kubernetes and containerd, their images and sysupdate configs, the reboot
/// marker, boot id and uptime. Read-only. Parse with `crate::node::parse_facts`.
pub const FACTS_SCRIPT: &str = concat!(include_str!("prelude.sh"), include_str!("facts.sh"));

/// Asks the API server, through the admin kubeconfig of a control-plane node,
/// for the nodes, the kubeadm cluster version and whether kube-proxy is
/// deployed. Read-only. Parse with `crate::node::parse_cluster`.
pub const CLUSTER_SCRIPT: &str = concat!(include_str!("prelude.sh"), include_str!("cluster.sh"));

/// Reads what the checks before a hop judge (`crate::checks`): the
/// deprecated-API gauge of `/metrics`, the PodDisruptionBudgets and
/// kubeadm's certificate expiry. Read-only; runs on the first control
/// plane. Parse with `crate::node::parse_check_outputs`.
pub const CHECKS_SCRIPT: &str = concat!(include_str!("prelude.sh"), include_str!("checks.sh"));

/// [`CHECKS_SCRIPT`] right after [`CLUSTER_SCRIPT`] on the same fleet (a
/// plan, apply's re-plan): the kube-apiserver pods, the nodes and the
/// kubelet-config and kubeadm-config ConfigMaps are not asked again, but
/// taken from what the cluster script printed. Parse with
/// `crate::node::parse_check_outputs_after_cluster`.
pub const CHECKS_AFTER_CLUSTER_SCRIPT: &str = concat!(
    include_str!("prelude.sh"),
    "fleetctl_cluster_read=1\n",
    include_str!("checks.sh")
);

/// What the gates before a drain ask the API server: `/readyz` and every
/// node, both at once. Read-only; runs on the first control plane. Parse
/// with `crate::node::parse_gates`.
pub const GATES_SCRIPT: &str = concat!(include_str!("prelude.sh"), include_str!("gates.sh"));

/// Reads the deprecated-API gauge of each kube-apiserver instance at its
/// advertise address, through the first control plane's admin.conf with
/// `--server=https://ADDR:PORT`; `instances` are (node name, endpoint),
/// both validated by `crate::checks::parse_apiserver_instances` (a DNS-1123
/// name, an IP address). Parse with `crate::node::parse_instance_metrics`.
pub fn instance_metrics_script(instances: &[(String, std::net::SocketAddr)]) -> String {
    let mut script = concat!(include_str!("prelude.sh"), include_str!("metrics.sh")).to_string();
    // Double quotes, never single ones (the script is single-quote free):
    // a validated name and an address's digits, dots, colons and brackets
    // hold nothing sh expands inside them. Anything else is left out.
    let safe = |s: &str, extra: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || extra.contains(c))
    };
    for (node, addr) in instances {
        let addr = addr.to_string();
        if safe(node, "-.") && safe(&addr, ".:[]%") {
            script.push_str(&format!(
                "probe \"metrics {node}\" fleetctl_metrics_at \"{addr}\"\n"
            ));
        }
    }
    script.push_str("printf \"@@fleetctl:done@@\\n\"\n");
    script
}

pub mod before_hop;
pub mod etcd_status;
pub mod kubectl;
pub mod kured_pods;
pub mod rook;

/// The section markers `prelude.sh` prints, shared with the parsers so the
/// two cannot drift apart silently (a test checks the scripts use them).
pub mod markers {
    /// `@@fleetctl:begin NAME[ ARGUMENT]@@` opens a probe's section.
    pub const BEGIN: &str = "@@fleetctl:begin ";
    /// Separates a probe's stdout from its stderr.
    pub const STDERR: &str = "@@fleetctl:stderr@@";
    /// `@@fleetctl:end STATUS@@` closes a section with the probe's exit status.
    pub const END: &str = "@@fleetctl:end ";
    /// Closes every marker line.
    pub const CLOSE: &str = "@@";
}

pub mod stage_record;
pub mod upgrade;

/// The etcd snapshot's file on the first control plane (`steps::etcd`; the
/// snapshot itself is `before_hop::etcd_snapshot_save`): its sha256, its bytes
/// streamed to the laptop, and its removal, which runs whatever else failed
/// (the file holds every Secret).
pub mod snapshot_file {
    use crate::shell::quote;

    pub fn sha256(path: &str) -> String {
        format!("sha256sum -- {}", quote(path))
    }

    pub fn cat(path: &str) -> String {
        format!("cat -- {}", quote(path))
    }

    /// Its size in bytes, which bounds the copy.
    pub fn size(path: &str) -> String {
        format!("stat -c %s -- {}", quote(path))
    }

    pub fn remove(path: &str) -> String {
        format!("rm -f -- {}", quote(path))
    }
}

/// The alert gate's reading (`steps::hold`), on the first control plane:
/// Prometheus or Alertmanager is usually reachable from the nodes (a
/// Service's ClusterIP, a NodePort), not from the operator's laptop.
pub mod alerts {
    use crate::shell::quote;

    /// `url` was checked by `pacing::AlertGate::new` (http(s), no
    /// credentials); quoted all the same. `-f`: an HTTP error is a failed
    /// reading, never an empty list of alerts.
    pub fn query(url: &str) -> String {
        format!(
            "curl -fsS --max-time 10 -H 'Accept: application/json' -- {}",
            quote(url)
        )
    }
}

/// A DNS-1123 subdomain, as Kubernetes requires of node, namespace and
/// pod names: lower-case letters, digits, `-` and `.`, neither first nor
/// last, at most 253 characters. Such a name is one bare word for sh.
pub fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        && !s.starts_with(['-', '.'])
        && !s.ends_with(['-', '.'])
}

/// `arg` bare when no shell reads anything into it (so the journal reads
/// like what an operator types: `-n kube-system get daemonset kured`),
/// quoted otherwise.
pub(crate) fn word(arg: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_./:=@,+%".contains(c);
    if !arg.is_empty() && arg.chars().all(plain) {
        arg.to_string()
    } else {
        crate::shell::quote(arg)
    }
}

#[cfg(test)]
pub(crate) mod fake_root;
#[cfg(test)]
mod tests;
