//! The `post-upgrade` phase of `kubeadm upgrade apply|node`, per kubeadm
//! version, as kubeadm's source has it (kubernetes/kubernetes,
//! cmd/kubeadm/app/cmd/phases/upgrade/postupgrade.go, `runPostUpgrade`):
//!
//! - up to v1.34 (the file at commit 6f9d95985a74): a placeholder that
//!   touches nothing;
//! - v1.35 (commit 4f6fdb4551e8, kubernetes/kubernetes#133778): calls
//!   `upgrade.RemoveKubeletArgsFromFile` with `unwantedFlags =
//!   ["pod-infra-container-image"]`, with a TODO to empty the list in v1.36
//!   (kubernetes/kubeadm#3108);
//! - v1.36 (after kubernetes/kubernetes#135807): the same call with
//!   `unwantedFlags = []string{}`. So a kubelet that jumps from v1.34 past
//!   v1.35 keeps the flag kubelet v1.35+ refuses: kubeadm does not support
//!   skipping minors (neolit123 on #135807);
//! - v1.37 on (kubernetes/kubernetes#138645, which removed the
//!   NodeLocalCRISocket gate): `unwantedFlags =
//!   []string{"container-runtime-endpoint"}`, the endpoint being in
//!   instance-config.yaml since v1.34.
//!
//! `RemoveKubeletArgsFromFile` backs the flags file up under
//! /etc/kubernetes/tmp/ and writes it again (its caller's comment). A real
//! v1.35.4 `upgrade node` on a worker printed (kubeadm's own words, kept
//! here): a klog warning `Using temporary directory
//! /etc/kubernetes/tmp/kubeadm-kubelet-env<digits> for kubelet env file`,
//! then `[upgrade] Backing up kubelet env file to <dir>/kubeadm-flags.env`
//! and `[kubelet-start] Writing kubelet environment file with flags to file
//! "/var/lib/kubelet/kubeadm-flags.env"`.
//!
//! v1.35.0 alone fails when the file holds no flag at all
//! (`KUBELET_KUBEADM_ARGS=""`, what a node kubeadm v1.35 set up or already
//! cleaned has): `ReadKubeletDynamicEnvFile`
//! (cmd/kubeadm/app/phases/kubelet/flags.go) took an empty list for an
//! error, `error execution phase post-upgrade: error reading kubelet env
//! file: no flags found in file "/var/lib/kubelet/kubeadm-flags.env"`
//! (kubernetes/kubeadm#3279, which #133778's removal of the pause flag
//! brought to light; fixed by kubernetes/kubernetes#136127, cherry-picked
//! to release-1.35 as #136131 for the next patch). fleetctl's plan warns
//! when a hop would use v1.35.0 (docs/upgrade-path.md).
//!
//! Not found in the stored sources: the body of `RemoveKubeletArgsFromFile`
//! itself (cmd/kubeadm/app/phases/upgrade/postupgrade.go at v1.35+). Its
//! test (`TestRemoveKubeletArgsFromFile`) shows the file rewritten as
//! `KUBELET_KUBEADM_ARGS="…"` without the unwanted flags and unchanged when
//! none is there. The sim therefore backs up and rewrites on v1.36+ too,
//! with nothing removed, and leaves a missing flags file alone (a node
//! without one has nothing to clean).

use super::super::util::{KubeVersion, glog_prefix};
use super::super::{Env, complain, say};
use crate::kubelet_files;

/// The first kubeadm whose post-upgrade phase rewrites the flags file.
const REWRITES_SINCE_MINOR: u64 = 35;
/// Where kubeadm keeps its backups (`kubeadmconstants.KubernetesDir` + tmp).
const TMP_DIR: &str = "/etc/kubernetes/tmp";

/// The first kubeadm whose post-upgrade strips `--container-runtime-endpoint`
/// (kubernetes/kubernetes#138645: `unwantedFlags :=
/// []string{"container-runtime-endpoint"}`).
const STRIPS_ENDPOINT_SINCE_MINOR: u64 = 37;

/// The flags `kubeadm` of this version removes from kubeadm-flags.env.
pub fn unwanted_flags(kubeadm: KubeVersion) -> &'static [&'static str] {
    if kubeadm.minor == u64::from(kubelet_files::POD_INFRA_REMOVED_MINOR) {
        &[kubelet_files::POD_INFRA_FLAG]
    } else if kubeadm.minor >= STRIPS_ENDPOINT_SINCE_MINOR {
        &[kubelet_files::ENDPOINT_FLAG]
    } else {
        &[]
    }
}

/// kubeadm v1.35.0's post-upgrade refuses a flags file without flags
/// (kubernetes/kubeadm#3279; the module's documentation).
fn fails_on_no_flags(kubeadm: KubeVersion) -> bool {
    (kubeadm.major, kubeadm.minor, kubeadm.patch) == (1, 35, 0)
}

/// Runs the phase; `Err` is the message kubeadm fails with.
pub fn run(env: &mut Env, kubeadm: KubeVersion) -> Result<(), String> {
    if kubeadm.minor < REWRITES_SINCE_MINOR {
        return Ok(());
    }
    let path = env.path(kubelet_files::FLAGS_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => {
            return Err(format!(
                "error execution phase post-upgrade: failed to read {}: {e}",
                kubelet_files::FLAGS_FILE
            ));
        }
    };
    if fails_on_no_flags(kubeadm) && kubelet_files::has_no_flags(&text) {
        return Err(format!(
            "error execution phase post-upgrade: error reading kubelet env file: no flags found in file \"{}\"",
            kubelet_files::FLAGS_FILE
        ));
    }
    let backup_dir = format!("{TMP_DIR}/kubeadm-kubelet-env{}", temp_suffix());
    complain!(
        env,
        "{} {:>5} postupgrade.go:203] Using temporary directory {backup_dir} for kubelet env file. \
         To override it set the environment variable KUBEADM_UPGRADE_DRYRUN_DIR",
        glog_prefix('W', crate::state::now()),
        std::process::id()
    );
    let backup = format!("{backup_dir}/{}", file_name(kubelet_files::FLAGS_FILE));
    say!(env, "[upgrade] Backing up kubelet env file to {backup}");
    let backed_up = std::fs::create_dir_all(env.path(&backup_dir))
        .and_then(|()| std::fs::write(env.path(&backup), &text));
    if let Err(e) = backed_up {
        return Err(format!(
            "error execution phase post-upgrade: error backing up the kubelet env file: {e}"
        ));
    }
    let mut fixed = text;
    for flag in unwanted_flags(kubeadm) {
        if let Some(without) = kubelet_files::without_flag(&fixed, flag) {
            fixed = without;
        }
    }
    say!(
        env,
        "[kubelet-start] Writing kubelet environment file with flags to file \"{}\"",
        kubelet_files::FLAGS_FILE
    );
    std::fs::write(&path, fixed).map_err(|e| {
        format!(
            "error execution phase post-upgrade: failed to write {}: {e}",
            kubelet_files::FLAGS_FILE
        )
    })
}

fn file_name(abs: &str) -> &str {
    abs.rsplit('/').next().unwrap_or(abs)
}

/// Go's `os.MkdirTemp` appends a random decimal uint32 to the pattern.
fn temp_suffix() -> u32 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    nanos ^ std::process::id().rotate_left(16)
}

#[cfg(test)]
mod tests {
    use super::super::super::testutil::{Fleet, Node};
    use crate::kubelet_files::{FLAGS_FILE, initial_flags};
    use crate::state::Role;
    use crate::version::Version;

    /// The flags files kubeadm backed up on `node`, oldest name first.
    fn backups(node: &Node) -> Vec<String> {
        let Ok(dir) = std::fs::read_dir(node.path(super::TMP_DIR)) else {
            return Vec::new();
        };
        let mut names: Vec<String> = dir
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("kubeadm-kubelet-env"))
            .collect();
        names.sort();
        names
            .iter()
            .map(|n| node.read(&format!("{}/{n}/kubeadm-flags.env", super::TMP_DIR)))
            .collect()
    }

    #[test]
    fn each_kubeadm_does_what_its_runpostupgrade_does_to_the_flags_file() {
        let v134 = initial_flags(&Version::parse("v1.34.2").unwrap());
        let v135 = initial_flags(&Version::parse("v1.35.0").unwrap());
        assert_ne!(v134, v135);
        // (kubeadm, cluster, flags after, backed up?)
        for (kubeadm, cluster, after, backed_up) in [
            ("v1.34.3", "v1.34.2", &v134, false),
            ("v1.35.0", "v1.35.0", &v135, true),
            ("v1.36.0", "v1.36.0", &v134, true),
            ("v1.37.0", "v1.37.0", &v134, true),
        ] {
            let fleet = Fleet::new();
            let cp = fleet.node("cp1", Role::ControlPlane, cluster);
            let w1 = fleet.node("w1", Role::Worker, "v1.34.2");
            cp.update_cluster(|c| c.version = cluster.into());
            let r = w1.run_image(
                kubeadm,
                "kubeadm",
                &["upgrade", "node", "--skip-phases", "addon/kube-proxy"],
            );
            assert_eq!(r.code, 0, "{kubeadm}: {}", r.stderr);
            assert_eq!(&w1.read(FLAGS_FILE), after, "{kubeadm}");
            let saved = backups(&w1);
            if backed_up {
                assert_eq!(saved, vec![v134.clone()], "{kubeadm}");
                assert!(
                    r.stdout.contains("[upgrade] Backing up kubelet env file to /etc/kubernetes/tmp/kubeadm-kubelet-env")
                        && r.stdout.contains(
                            "[kubelet-start] Writing kubelet environment file with flags to file \"/var/lib/kubelet/kubeadm-flags.env\"\n"
                        ),
                    "{kubeadm}: {}",
                    r.stdout
                );
                assert!(
                    r.stderr.contains("postupgrade.go:203] Using temporary directory /etc/kubernetes/tmp/kubeadm-kubelet-env"),
                    "{kubeadm}: {}",
                    r.stderr
                );
            } else {
                assert!(saved.is_empty(), "{kubeadm}: {saved:?}");
                assert!(!r.stdout.contains("kubelet env file"), "{kubeadm}");
            }
        }
    }

    #[test]
    fn kubeadm_v1_35_0_alone_fails_on_a_flags_file_without_flags() {
        let empty = initial_flags(&Version::parse("v1.35.2").unwrap());
        assert_eq!(empty, "KUBELET_KUBEADM_ARGS=\"\"\n");
        for (kubeadm, fails) in [("v1.35.0", true), ("v1.35.1", false), ("v1.36.0", false)] {
            let fleet = Fleet::new();
            let cp = fleet.node("cp1", Role::ControlPlane, "v1.35.0");
            let w1 = fleet.node("w1", Role::Worker, "v1.35.0");
            cp.update_cluster(|c| c.version = "v1.35.0".into());
            w1.write(FLAGS_FILE, &empty);
            let r = w1.run_image(
                kubeadm,
                "kubeadm",
                &["upgrade", "node", "--skip-phases", "addon/kube-proxy"],
            );
            if fails {
                assert_ne!(r.code, 0, "{kubeadm}: {}", r.stdout);
                assert!(
                    r.stderr.contains(
                        "error execution phase post-upgrade: error reading kubelet env file: \
                         no flags found in file \"/var/lib/kubelet/kubeadm-flags.env\""
                    ),
                    "{kubeadm}: {}",
                    r.stderr
                );
                assert!(backups(&w1).is_empty(), "{kubeadm}: nothing backed up");
            } else {
                assert_eq!(r.code, 0, "{kubeadm}: {}", r.stderr);
            }
            assert_eq!(w1.read(FLAGS_FILE), empty, "{kubeadm}");
        }
    }

    #[test]
    fn v1_35_and_v1_37_list_an_unwanted_flag() {
        let v = |s: &str| super::super::super::util::KubeVersion::parse(s).unwrap();
        assert!(super::unwanted_flags(v("v1.34.3")).is_empty());
        assert_eq!(
            super::unwanted_flags(v("v1.35.0")),
            ["--pod-infra-container-image"]
        );
        assert!(super::unwanted_flags(v("v1.36.0")).is_empty());
        assert_eq!(
            super::unwanted_flags(v("v1.37.0")),
            ["--container-runtime-endpoint"]
        );
    }
}
