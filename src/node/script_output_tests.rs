//! The scripts run for real here, with `sh`: on this machine as it is (no
//! Flatcar, no kubelet: everything must come out "absent"), and against a
//! fake Flatcar root (`remote::fake_root`), with fake tools printing real
//! tools' output, whose result must match the whole-output fixtures byte for
//! byte and parse with this module's parsers.

use std::fs;
use std::path::Path;

use super::{Pin, parse_check_outputs, parse_cluster, parse_facts, parse_gates};
use crate::remote::fake_root::{FakeRoot, PATH_LINE, sh};
use crate::remote::{CHECKS_SCRIPT, CLUSTER_SCRIPT, FACTS_SCRIPT, GATES_SCRIPT};
use crate::version::{Minor, Version};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src/node/fixtures");

fn fixture(name: &str) -> String {
    fs::read_to_string(Path::new(FIXTURES).join(name)).expect("fixture exists")
}

#[test]
fn facts_script_on_this_machine_reports_absence_not_errors() {
    let output = sh(FACTS_SCRIPT, &std::env::var("PATH").unwrap_or_default());
    let facts = parse_facts(&output).expect("output of the real script parses");

    let read = |p: &str| fs::read_to_string(p).unwrap_or_default().trim().to_string();
    assert_eq!(facts.hostname, read("/proc/sys/kernel/hostname"));
    assert_eq!(facts.boot_id, read("/proc/sys/kernel/random/boot_id"));
    assert!(facts.uptime_seconds > 0);
    assert_eq!(
        facts.reboot_required,
        Path::new("/run/reboot-required").exists()
    );
    if !Path::new("/usr/bin/update_engine_client").exists() {
        assert_eq!(facts.os.current_op, "");
        assert_eq!(facts.os.staged, None);
    }
    if !Path::new("/etc/extensions/kubernetes.raw").exists() && !on_path("kubelet") {
        assert_eq!(facts.kubernetes.running, None);
        assert_eq!(facts.kubernetes.staged, None);
        assert_eq!(facts.kubernetes.staged_target, None);
        assert!(facts.kubernetes.images.is_empty());
        assert!(facts.kubernetes.configs.is_empty());
    }
    if !Path::new("/etc/extensions/containerd.raw").exists()
        && !Path::new("/opt/extensions/containerd").exists()
        && !Path::new("/etc/sysupdate.containerd.d").exists()
    {
        assert_eq!(facts.containerd, None);
    }
}

fn on_path(tool: &str) -> bool {
    std::env::var("PATH")
        .unwrap_or_default()
        .split(':')
        .any(|dir| Path::new(dir).join(tool).exists())
}

#[test]
fn cluster_script_without_kubectl_fails_with_a_clear_error() {
    // Only an empty directory on PATH: no kubectl (and no timeout) at all.
    let bin = tempfile::tempdir().unwrap();
    let only_bin = bin.path().display().to_string();
    let output = sh(
        &CLUSTER_SCRIPT.replace(PATH_LINE, &format!("PATH={only_bin}")),
        &only_bin,
    );
    let err = parse_cluster(&output).expect_err("no kubectl here");
    let message = format!("{err:#}");
    assert!(
        message.starts_with("`kubectl get nodes` failed: command not found (exit status 127): "),
        "{message}"
    );
}

/// Compares with a fixture; `FLEETCTL_BLESS=1` rewrites the fixture instead.
fn assert_fixture(name: &str, actual: &str) {
    let path = Path::new(FIXTURES).join(name);
    if std::env::var_os("FLEETCTL_BLESS").is_some() {
        fs::write(&path, actual).unwrap();
    }
    let expected = fs::read_to_string(&path).unwrap_or_default();
    assert!(
        expected == actual,
        "{name} differs from the script's output (FLEETCTL_BLESS=1 to rewrite):\n{actual}"
    );
}

const CHECK_FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src/checks/fixtures");

/// A control-plane node mid-upgrade: v1.36.4 running, v1.37.2 staged and
/// pinned, an OS update staged too, containerd's sysext floating.
fn flatcar_control_plane() -> FakeRoot {
    let fake = FakeRoot::new();
    let ue_status = fixture("update-engine-status.idle")
        .replace("UPDATE_STATUS_IDLE", "UPDATE_STATUS_UPDATED_NEED_REBOOT")
        .replace("NEW_VERSION=0.0.0", "NEW_VERSION=3510.3.6")
        .replace("NEW_SIZE=0", "NEW_SIZE=472121344")
        .replace("LAST_CHECKED_TIME=0", "LAST_CHECKED_TIME=1764320043");
    fake.file("/proc/sys/kernel/hostname", "cp-1\n")
        .file("/proc/sys/kernel/random/boot_id", "8181f9d7-4fb1-4e32-9102-b1821a4359f0\n")
        .file("/proc/uptime", "351208.43 694112.87\n")
        .file("/etc/os-release", &fixture("os-release.flatcar"))
        .file("/fixtures/ue-status", &ue_status)
        .file("/fixtures/ue-log", &fixture("update-engine-status.idle.stderr"))
        .tool(
            "update_engine_client",
            &format!(
                "cat {root}/fixtures/ue-log >&2\ncat {root}/fixtures/ue-status",
                root = fake.root().display()
            ),
        )
        .file("/run/reboot-required", "")
        .file("/var/lib/fleetctl/kubeadm-step", "v1.37.2\n")
        .file(
            "/var/lib/fleetctl/staged/kubernetes",
            "8181f9d7-4fb1-4e32-9102-b1821a4359f0\n\
             ../../opt/extensions/kubernetes/kubernetes-v1.36.4-x86-64.raw\n",
        )
        .tool("uname", r#"[ "$1" = -m ] && echo x86_64"#)
        .file(
            "/var/lib/kubelet/kubeadm-flags.env",
            &fs::read_to_string(Path::new(CHECK_FIXTURES).join("kubeadm-flags.env")).unwrap(),
        )
        .file(
            "/etc/systemd/system/kubelet.service.d/20-node-ip.conf",
            "[Service]\nEnvironment=\"KUBELET_EXTRA_ARGS=--node-ip=10.0.0.11\"\n",
        )
        .file("/sys/fs/cgroup/cgroup.controllers", "cpuset cpu io memory pids\n")
        .file(
            "/var/lib/kubelet/config.yaml",
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncgroupDriver: systemd\n",
        )
        .tool("kubelet", "echo Kubernetes v1.36.4")
        .symlink(
            "/etc/extensions/kubernetes.raw",
            "../../opt/extensions/kubernetes/kubernetes-v1.37.2-x86-64.raw",
        )
        .file("/opt/extensions/kubernetes/kubernetes-v1.36.4-x86-64.raw", "")
        .file("/opt/extensions/kubernetes/kubernetes-v1.37.2-x86-64.raw", "")
        .file("/etc/sysupdate.kubernetes.d/kubernetes.conf", &fixture("kubernetes-v1.37.conf"))
        .tool(
            "containerd",
            "echo containerd github.com/containerd/containerd/v2 v2.1.4 75cb2b7193e4e490e9fbdc236c0e811ccaba3376",
        )
        .symlink(
            "/etc/extensions/containerd.raw",
            "/opt/extensions/containerd/containerd-2.1.4-x86-64.raw",
        )
        .file("/opt/extensions/containerd/containerd-2.1.4-x86-64.raw", "")
        .file(
            "/etc/sysupdate.containerd.d/containerd.conf",
            &fixture("kubernetes.conf").replace("kubernetes", "containerd"),
        );
    fake
}

#[test]
fn facts_script_on_a_fake_flatcar_root_matches_the_fixture() {
    let output = flatcar_control_plane().run(FACTS_SCRIPT);
    assert_fixture("facts.cp-1.txt", &output);
    // What the fixture means is asserted in node::parse's tests; here just
    // that the script's own output carries the facts through.
    let facts = parse_facts(&output).unwrap();
    assert_eq!(facts.kubernetes.staged, Some(Version::new(1, 37, 2)));
    assert_eq!(
        facts.kubernetes.configs[0].pin,
        Pin::Pinned(Minor::new(1, 37))
    );
    assert_eq!(facts.arch.as_deref(), Some("x86_64"));
    assert_eq!(
        facts.cgroup.v2,
        Some(true),
        "the fake root's, not the host's"
    );
    assert_eq!(
        facts.kubelet_files.keys().collect::<Vec<_>>(),
        [
            "/etc/systemd/system/kubelet.service.d/20-node-ip.conf",
            "/var/lib/kubelet/kubeadm-flags.env"
        ]
    );
}

#[test]
fn facts_script_keeps_config_files_byte_for_byte() {
    let fake = FakeRoot::new();
    let no_newline = "[Source]\nMatchPattern=kubernetes-v1.36.@v-%a.raw";
    let crlf = "[Source]\r\nMatchPattern=kubernetes-@v-%a.raw\r\n";
    let trailing_blank = "[Source]\nMatchPattern=kubernetes-v1.36.@v-%a.raw\n\n\n";
    fake.file("/etc/sysupdate.kubernetes.d/a-no-newline.conf", no_newline)
        .file("/etc/sysupdate.kubernetes.d/b-crlf.conf", crlf)
        .file("/etc/sysupdate.kubernetes.d/c-empty.conf", "")
        .file(
            "/etc/sysupdate.kubernetes.d/d-blank-lines.conf",
            trailing_blank,
        )
        .file(
            "/etc/sysupdate.kubernetes.d/e-new-style.transfer",
            no_newline,
        )
        .file(
            "/etc/sysupdate.kubernetes.d/ignored.txt",
            "not a transfer file",
        );
    let facts = parse_facts(&fake.run(FACTS_SCRIPT)).unwrap();
    let got: Vec<(&str, &str, &Pin)> = facts
        .kubernetes
        .configs
        .iter()
        .map(|c| (c.path.as_str(), c.content.as_str(), &c.pin))
        .collect();
    let pinned = Pin::Pinned(Minor::new(1, 36));
    assert_eq!(
        got,
        vec![
            (
                "/etc/sysupdate.kubernetes.d/a-no-newline.conf",
                no_newline,
                &pinned
            ),
            (
                "/etc/sysupdate.kubernetes.d/b-crlf.conf",
                crlf,
                &Pin::Floating
            ),
            (
                "/etc/sysupdate.kubernetes.d/c-empty.conf",
                "",
                &Pin::Unknown
            ),
            (
                "/etc/sysupdate.kubernetes.d/d-blank-lines.conf",
                trailing_blank,
                &pinned
            ),
            (
                "/etc/sysupdate.kubernetes.d/e-new-style.transfer",
                no_newline,
                &pinned
            ),
        ]
    );
    // Nothing else on this fake node: a missing tool is absence, not failure.
    assert_eq!(facts.kubernetes.running, None);
    assert_eq!(facts.containerd, None);
}

#[test]
fn cluster_script_with_a_fake_kubectl_matches_the_fixture() {
    let fake = FakeRoot::new();
    fake.file("/fixtures/nodes.json", &fixture("kubectl-get-nodes.json"))
        .file(
            "/fixtures/kubeadm-config.json",
            &fixture("kubeadm-config.json"),
        )
        .tool(
            "kubectl",
            &format!(
                r#"case "$*" in
*"get nodes -o json"*) cat {root}/fixtures/nodes.json ;;
*"-n kube-system get configmap/kubeadm-config configmap/kubelet-config daemonset/kube-proxy --ignore-not-found -o json"*)
  printf '{{"apiVersion": "v1", "kind": "List", "items": [\n'
  cat {root}/fixtures/kubeadm-config.json
  printf ']}}\n' ;;
*"-n kube-system get pods -l component=kube-apiserver -o json"*)
  echo '{{"kind":"List","items":[{{"metadata":{{"name":"kube-apiserver-cp-1","annotations":{{"kubernetes.io/config.mirror":"5f1a"}}}},"spec":{{"nodeName":"cp-1","containers":[{{"image":"registry.k8s.io/kube-apiserver:v1.36.4"}}]}}}}]}}' ;;
*) echo "unexpected: $*" >&2; exit 2 ;;
esac"#,
                root = fake.root().display()
            ),
        );
    let output = fake.run(CLUSTER_SCRIPT);
    assert_fixture("cluster.txt", &output);
    let cluster = parse_cluster(&output).unwrap();
    assert_eq!(cluster.nodes.len(), 3);
    assert!(!cluster.kube_proxy);
    assert_eq!(cluster.apiservers, ["v1.36.4".parse::<Version>().unwrap()]);
}

#[test]
fn checks_script_reports_a_failed_metrics_fetch_as_a_failure() {
    let fake = FakeRoot::new();
    fake.tool(
        "kubectl",
        r#"echo "The connection to the server 10.0.0.1:6443 was refused" >&2; exit 1"#,
    );
    let out = parse_check_outputs(&fake.run(CHECKS_SCRIPT)).unwrap();
    assert!(out.metrics.unwrap_err().contains("was refused"));
    assert!(out.certs.unwrap_err().contains("127"));
}

#[test]
fn gates_script_asks_readyz_and_the_nodes_at_once() {
    let fake = FakeRoot::new();
    // /readyz answers only once the node list has been asked for: were the
    // two asked one after the other, it would give up and fail.
    fake.file("/run/.keep", "")
        .file("/fixtures/nodes.json", &fixture("kubectl-get-nodes.json"))
        .tool(
            "kubectl",
            &format!(
                r#"case "$*" in
*"get --raw /readyz"*)
  i=0; while [ ! -f {root}/asked-nodes ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
  [ -f {root}/asked-nodes ] && echo ok || {{ echo "asked alone" >&2; exit 1; }} ;;
*"get nodes -o json"*) touch {root}/asked-nodes; cat {root}/fixtures/nodes.json ;;
*) echo "unexpected: $*" >&2; exit 2 ;;
esac"#,
                root = fake.root().display()
            ),
        );
    let output = fake.run(GATES_SCRIPT);
    let view = parse_gates(&output).unwrap();
    assert_eq!(view.not_ready, None, "{output}");
    assert_eq!(view.nodes.len(), 3);
    let left: Vec<_> = fs::read_dir(fake.root().join("run")).unwrap().collect();
    assert_eq!(left.len(), 1, "only .keep is left in /run: {left:?}");
}

#[test]
fn gates_script_reports_an_unready_api_server() {
    let fake = FakeRoot::new();
    fake.file("/run/.keep", "").tool(
        "kubectl",
        r#"echo "The connection to the server 10.0.0.1:6443 was refused - did you specify the right host or port?" >&2; exit 1"#,
    );
    let view = parse_gates(&fake.run(GATES_SCRIPT)).unwrap();
    assert!(
        view.not_ready
            .as_deref()
            .is_some_and(|p| p.contains("was refused")),
        "{view:?}"
    );
    assert!(view.nodes.is_empty());
}
