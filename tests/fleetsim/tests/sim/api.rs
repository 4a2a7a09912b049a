//! The simulated API server against the REAL kubectl (the machine image's
//! `/usr/lib/google-cloud-sdk/bin/kubectl.1.NN`): what kubectl prints and
//! how it exits is the judge, not what the sim thinks it answered.
//!
//! A missing binary fails the test (the fleet's nodes need it too); everything
//! else (HOME, the discovery cache, the kubeconfig) is the test's own, so
//! nothing of the host's user leaks in.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use fleetsim::Fleet;

use crate::common::{run, small, start, stderr, stdout, wait_child};

const KUBECTL_DIR: &str = "/usr/lib/google-cloud-sdk/bin";

/// The real kubectl of `minor`, run as a given identity against a fleet.
pub(crate) struct Kubectl {
    binary: PathBuf,
    kubeconfig: PathBuf,
    home: PathBuf,
}

/// The real kubectl 1.`minor` (`Some` always: absent is a failure).
/// The fleet is at rest once its cluster state says so; the API server's
/// instance manager opens each listener on its next look at that state (it
/// polls), so a client that starts at once can find the port still closed.
/// Waits, boundedly, for the kubeconfig's server to accept connections.
fn wait_listening(kubeconfig: &std::path::Path) {
    let text = std::fs::read_to_string(kubeconfig).unwrap();
    let server = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("server: https://"))
        .unwrap_or_else(|| panic!("no server in {}:\n{text}", kubeconfig.display()))
        .to_string();
    let deadline = Instant::now() + Duration::from_secs(15);
    while std::net::TcpStream::connect(&server).is_err() {
        assert!(
            Instant::now() < deadline,
            "the API server at {server} never listened"
        );
        thread::sleep(Duration::from_millis(50));
    }
}

pub(crate) fn kubectl(fleet: &Fleet, minor: u32, identity: &str) -> Option<Kubectl> {
    let binary = PathBuf::from(format!("{KUBECTL_DIR}/kubectl.1.{minor}"));
    // The fleet itself needs the real kubectl (every node runs it), so a
    // missing one is a failure, not a skip.
    assert!(
        binary.exists(),
        "{} is absent: the real kubectl comes with the machine image",
        binary.display()
    );
    let pki = fleet.dir().join("pki");
    let kubeconfig = if identity == "admin" {
        pki.join("admin.conf")
    } else {
        pki.join("nodes").join(format!("{identity}.conf"))
    };
    let home = fleet.dir().join(format!("home-{minor}-{identity}"));
    std::fs::create_dir_all(&home).unwrap();
    wait_listening(&kubeconfig);
    Some(Kubectl {
        binary,
        kubeconfig,
        home,
    })
}

impl Kubectl {
    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.binary);
        cmd.arg(format!("--kubeconfig={}", self.kubeconfig.display()))
            .arg(format!("--cache-dir={}", self.home.join("cache").display()))
            .arg("--request-timeout=20s")
            .args(args)
            .env_clear()
            .env("HOME", &self.home)
            .env("PATH", "/usr/bin:/bin")
            .stdin(Stdio::null());
        cmd
    }

    pub(crate) fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    fn ok(&self, args: &[&str]) -> String {
        let o = self.run(args);
        assert!(
            o.status.success(),
            "kubectl {args:?} failed ({}):\n{}{}",
            o.status,
            stdout(&o),
            stderr(&o)
        );
        stdout(&o)
    }

    /// Fails as kubectl does: exit 1 and `want` in stderr.
    fn fails(&self, args: &[&str], want: &str) -> Output {
        let o = self.run(args);
        assert_eq!(
            o.status.code(),
            Some(1),
            "kubectl {args:?}:\n{}{}",
            stdout(&o),
            stderr(&o)
        );
        assert!(
            stderr(&o).contains(want),
            "kubectl {args:?}: expected {want:?} in stderr:\n{}",
            stderr(&o)
        );
        o
    }
}

fn lines(s: &str) -> Vec<&str> {
    s.lines().collect()
}

#[test]
fn the_real_kubectl_reads_nodes_pods_and_versions() {
    let fleet = start(small(2));
    for minor in [33, 31] {
        let Some(k) = kubectl(&fleet, minor, "admin") else {
            return;
        };
        assert_eq!(
            lines(&k.ok(&["get", "nodes", "-o", "name"])),
            ["node/cp-1", "node/w-1", "node/w-2"]
        );
        assert_eq!(
            k.ok(&[
                "get",
                "node",
                "w-1",
                "-o",
                "jsonpath={.status.nodeInfo.kubeletVersion} {.status.conditions[?(@.type==\"Ready\")].status}"
            ]),
            "v1.34.2 True"
        );
        let static_pods = k.ok(&[
            "get",
            "pods",
            "-n",
            "kube-system",
            "-l",
            "tier=control-plane",
            "-o",
            "name",
        ]);
        assert_eq!(
            lines(&static_pods),
            [
                "pod/etcd-cp-1",
                "pod/kube-apiserver-cp-1",
                "pod/kube-controller-manager-cp-1",
                "pod/kube-scheduler-cp-1"
            ]
        );
        let on_w1 = k.ok(&[
            "get",
            "pods",
            "-A",
            "--field-selector",
            "spec.nodeName=w-1",
            "-o",
            "jsonpath={range .items[*]}{.metadata.name}{\"\\n\"}{end}",
        ]);
        assert_eq!(on_w1.lines().count(), 2, "{on_w1}");
        assert!(on_w1.lines().any(|l| l.starts_with("web-")), "{on_w1}");
        // Human-readable: the apiserver's Table, as kubectl prints it.
        let table = k.ok(&["get", "nodes"]);
        let rows: Vec<Vec<&str>> = table
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(
            rows[0],
            ["NAME", "STATUS", "ROLES", "AGE", "VERSION"],
            "{table}"
        );
        assert_eq!(rows[1][..3], ["cp-1", "Ready", "control-plane"], "{table}");
        assert_eq!(rows[2][..3], ["w-1", "Ready", "<none>"], "{table}");
        assert_eq!(rows[2][4], "v1.34.2", "{table}");
        let version = k.ok(&["version"]);
        assert!(version.contains("Server Version: v1.34.2"), "{version}");
        k.fails(
            &["get", "pods", "--field-selector", "spec.containers=x"],
            "field label not supported: spec.containers",
        );
        k.fails(
            &["get", "node", "nope"],
            "Error from server (NotFound): nodes \"nope\" not found",
        );
        assert_eq!(k.ok(&["get", "--raw", "/readyz"]), "ok");
        let metrics = k.ok(&["get", "--raw", "/metrics"]);
        assert!(
            metrics.contains("# TYPE apiserver_request_total counter"),
            "{metrics}"
        );
    }
}

#[test]
fn drain_is_refused_by_a_budget_with_429_until_it_allows_the_eviction() {
    let fleet = start(small(2).faults(|f| f.pdb_block.push("w-1".into())));
    let Some(k) = kubectl(&fleet, 33, "admin") else {
        return;
    };
    let web = k.ok(&[
        "get",
        "pods",
        "-n",
        "default",
        "--field-selector",
        "spec.nodeName=w-1",
        "-o",
        "jsonpath={.items[0].metadata.name}",
    ]);
    // The budget holds: kubectl retries on 429 and gives up at its timeout.
    let o = k.fails(
        &["drain", "w-1", "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=2s"],
        &format!("error when evicting pods/\"{web}\" -n \"default\" (will retry after 5s): Cannot evict pod as it would violate the pod's disruption budget."),
    );
    assert!(
        stderr(&o).contains(&format!(
            "error: unable to drain node \"w-1\" due to error: error when evicting pods/\"{web}\" -n \"default\": global timeout reached: 2s, continuing command..."
        )),
        "{}",
        stderr(&o)
    );
    assert!(stdout(&o).contains("node/w-1 cordoned"), "{}", stdout(&o));
    assert_eq!(
        k.ok(&["get", "node", "w-1", "-o", "jsonpath={.spec.unschedulable}"]),
        "true",
        "a failed drain leaves the node cordoned"
    );
    assert_eq!(
        k.ok(&["get", "pod", "-n", "default", &web, "-o", "name"])
            .trim(),
        format!("pod/{web}")
    );

    // Refused until the budget allows it: lifted mid-drain, the next retry evicts.
    let mut drain = k
        .command(&[
            "drain",
            "w-1",
            "--ignore-daemonsets",
            "--delete-emptydir-data",
            "--timeout=60s",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    thread::sleep(Duration::from_millis(1500));
    fleet.faults(|f| f.pdb_block.clear()).unwrap();
    let status = wait_child(&mut drain, Duration::from_secs(30)).expect("drain never finished");
    let o = drain.wait_with_output().unwrap();
    assert!(status.success(), "{}{}", stdout(&o), stderr(&o));
    assert!(
        stderr(&o).contains("Cannot evict pod as it would violate the pod's disruption budget."),
        "{}",
        stderr(&o)
    );
    assert!(
        stdout(&o).contains(&format!("pod/{web} evicted")),
        "{}",
        stdout(&o)
    );
    assert!(stdout(&o).contains("node/w-1 drained"), "{}", stdout(&o));
    k.fails(
        &["get", "pod", "-n", "default", &web],
        &format!("Error from server (NotFound): pods \"{web}\" not found"),
    );
    // Uncordoned, its ReplicaSet's replacement comes back (the sim's scheduler).
    k.ok(&["uncordon", "w-1"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !k
        .run(&["get", "pod", "-n", "default", &web])
        .status
        .success()
    {
        assert!(Instant::now() < deadline, "the replacement never came");
        thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_stale_resource_version_is_a_conflict() {
    let fleet = start(small(1).kured(true));
    let Some(k) = kubectl(&fleet, 33, "admin") else {
        return;
    };
    // `create` sends protobuf; the patch JSON.
    assert_eq!(
        k.ok(&["create", "configmap", "lock", "--from-literal=holder=me"])
            .trim(),
        "configmap/lock created"
    );
    let rv = k.ok(&[
        "get",
        "configmap",
        "lock",
        "-o",
        "jsonpath={.metadata.resourceVersion}",
    ]);
    k.ok(&[
        "patch",
        "configmap",
        "lock",
        "--type=merge",
        "-p",
        r#"{"data":{"holder":"you"}}"#,
    ]);
    let stale =
        format!(r#"{{"metadata":{{"resourceVersion":"{rv}"}},"data":{{"holder":"me again"}}}}"#);
    k.fails(
        &["patch", "configmap", "lock", "--type=merge", "-p", &stale],
        "Error from server (Conflict): Operation cannot be fulfilled on configmaps \"lock\": the object has been modified; please apply your changes to the latest version and try again",
    );
    assert_eq!(
        k.ok(&["get", "configmap", "lock", "-o", "jsonpath={.data.holder}"]),
        "you"
    );

    // fleetctl's release: a raw DELETE with preconditions, its Status copied to stdout.
    let uid = k.ok(&["get", "configmap", "lock", "-o", "jsonpath={.metadata.uid}"]);
    let rv = k.ok(&[
        "get",
        "configmap",
        "lock",
        "-o",
        "jsonpath={.metadata.resourceVersion}",
    ]);
    let delete = |rv: &str| {
        let body = format!(
            r#"{{"kind":"DeleteOptions","apiVersion":"v1","preconditions":{{"uid":"{uid}","resourceVersion":"{rv}"}}}}"#
        );
        let mut child = k
            .command(&[
                "delete",
                "--raw",
                "/api/v1/namespaces/default/configmaps/lock",
                "-f",
                "-",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::io::Write::write_all(&mut child.stdin.take().unwrap(), body.as_bytes()).unwrap();
        child.wait_with_output().unwrap()
    };
    let stale = delete("1");
    assert_eq!(stale.status.code(), Some(1));
    assert_eq!(
        stderr(&stale),
        format!(
            "Error from server (Conflict): Operation cannot be fulfilled on ConfigMap \"lock\": the ResourceVersion in the precondition (1) does not match the ResourceVersion in record ({rv}). The object might have been modified\n"
        )
    );
    let done = delete(&rv);
    assert!(done.status.success(), "{}", stderr(&done));
    assert_eq!(
        stdout(&done),
        format!(
            "{{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{{}},\"status\":\"Success\",\"details\":{{\"name\":\"lock\",\"kind\":\"configmaps\",\"uid\":\"{uid}\"}}}}\n"
        )
    );

    // Kured's lock as fleetctl takes it: annotate with a resourceVersion precondition.
    let ds = k.ok(&["get", "daemonsets", "-A", "-o", "jsonpath={range .items[?(@.metadata.name==\"kured\")]}{.metadata.namespace} {.metadata.resourceVersion}{end}"]);
    let (ns, rv) = ds.split_once(' ').expect("no kured DaemonSet");
    let lock = format!("--resource-version={rv}");
    assert_eq!(
        k.ok(&[
            "-n",
            ns,
            "annotate",
            "daemonset",
            "kured",
            "weave.works/kured-node-lock=fleetctl",
            &lock
        ])
        .trim(),
        "daemonset.apps/kured annotated"
    );
    k.fails(
        &["-n", ns, "annotate", "daemonset", "kured", "--overwrite", "weave.works/kured-node-lock=other", &lock],
        "Error from server (Conflict): Operation cannot be fulfilled on daemonsets.apps \"kured\": the object has been modified; please apply your changes to the latest version and try again",
    );
    let held = k.ok(&[
        "-n",
        ns,
        "get",
        "daemonset",
        "kured",
        "-o",
        "jsonpath={.metadata.annotations.weave\\.works/kured-node-lock}",
    ]);
    assert_eq!(held, "fleetctl");
}

#[test]
fn a_node_identity_gets_the_apiservers_forbidden() {
    let fleet = start(small(2));
    let (Some(admin), Some(w1)) = (kubectl(&fleet, 33, "admin"), kubectl(&fleet, 33, "w-1")) else {
        return;
    };
    // What the Node authorizer grants: reading nodes, changing its own Node.
    assert_eq!(lines(&w1.ok(&["get", "nodes", "-o", "name"])).len(), 3);
    w1.ok(&["cordon", "w-1"]);
    // NodeRestriction: not another node. The real kubectl prints the
    // refusal and still exits 0 (`kubectl/pkg/cmd/drain/drain.go`,
    // RunCordonOrUncordon: `printError(err); continue`): only the node's
    // state tells.
    let o = w1.run(&["cordon", "w-2"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stderr(&o),
        "error: unable to cordon node \"w-2\": nodes \"w-2\" is forbidden: node \"w-1\" is not allowed to modify node \"w-2\"\n"
    );
    assert_eq!(
        admin.ok(&["get", "node", "w-2", "-o", "jsonpath={.spec.unschedulable}"]),
        ""
    );
    admin.ok(&["create", "configmap", "lock"]);
    w1.fails(
        &["delete", "configmap", "lock"],
        "Error from server (Forbidden): configmaps \"lock\" is forbidden: User \"system:node:w-1\" cannot delete resource \"configmaps\" in API group \"\" in the namespace \"default\": can only read resources of this type",
    );
    w1.fails(
        &["get", "--raw", "/metrics"],
        "Error from server (Forbidden): forbidden: User \"system:node:w-1\" cannot get path \"/metrics\"",
    );
    let web = admin.ok(&[
        "get",
        "pods",
        "-n",
        "default",
        "--field-selector",
        "spec.nodeName=w-2",
        "-o",
        "jsonpath={.items[0].metadata.name}",
    ]);
    let o = w1.run(&[
        "drain",
        "w-2",
        "--ignore-daemonsets",
        "--delete-emptydir-data",
        "--timeout=5s",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    assert!(
        stderr(&o).contains("node \"w-1\" is not allowed to modify node \"w-2\""),
        "{}",
        stderr(&o)
    );
    assert!(
        admin
            .run(&["get", "pod", "-n", "default", &web])
            .status
            .success()
    );
    assert_eq!(
        admin.ok(&["get", "node", "w-2", "-o", "jsonpath={.spec.unschedulable}"]),
        ""
    );
}

#[test]
fn an_instance_is_gone_while_its_control_plane_reboots() {
    let fleet = start(small(1).boot_delay(1.0));
    let Some(k) = kubectl(&fleet, 33, "admin") else {
        return;
    };
    let cp = fleet.address("cp-1").unwrap();
    // The node's own admin.conf reaches the endpoint from inside the node.
    let inside = run(
        &fleet,
        "cp-1",
        "root",
        &format!(
            "{KUBECTL_DIR}/kubectl.1.33 --kubeconfig=/etc/kubernetes/admin.conf --cache-dir=/tmp/kc get node cp-1 -o name"
        ),
    );
    assert_eq!(inside.trim(), "node/cp-1");
    let id = crate::common::boot_id(&fleet, "cp-1");
    let _ = fleet.ssh("cp-1", "root", "reboot");
    fleet.wait_down("cp-1").unwrap();
    // The manager notices within its poll (100 ms).
    let deadline = Instant::now() + Duration::from_secs(3);
    let o = loop {
        let o = k.run(&["get", "nodes", "-o", "name"]);
        if !o.status.success() || Instant::now() > deadline {
            break o;
        }
        thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(stderr(&o).contains("connection refused"), "{}", stderr(&o));
    assert!(
        std::net::TcpStream::connect((cp.as_str(), 6443)).is_err(),
        "cp-1's instance still listens while it is down"
    );
    fleet.wait_rebooted("cp-1", &id).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let o = k.run(&["get", "nodes", "-o", "name"]);
        if o.status.success() {
            assert_eq!(lines(&stdout(&o)), ["node/cp-1", "node/w-1"]);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the API never came back: {}",
            stderr(&o)
        );
        thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn exec_runs_the_etcd_pods_command_on_its_node_over_websocket() {
    let fleet = start(small(1).kubernetes("v1.33.2"));
    let Some(k) = kubectl(&fleet, 33, "admin") else {
        return;
    };
    let pki = "/etc/kubernetes/pki/etcd";
    let (ca, cert, key) = (
        format!("--cacert={pki}/ca.crt"),
        format!("--cert={pki}/server.crt"),
        format!("--key={pki}/server.key"),
    );
    let exec = |cmd: &[&str]| {
        let mut args = vec!["-n", "kube-system", "exec", "etcd-cp-1", "--"];
        args.extend_from_slice(cmd);
        k.run(&args)
    };
    let saved = exec(&[
        "etcdctl",
        "--endpoints=https://127.0.0.1:2379",
        &ca,
        &cert,
        &key,
        "snapshot",
        "save",
        "/var/lib/etcd/api-test.db",
    ]);
    assert!(saved.status.success(), "{}", stderr(&saved));
    assert_eq!(
        stdout(&saved),
        "Snapshot saved at /var/lib/etcd/api-test.db\n"
    );
    assert!(
        stderr(&saved).contains("\"msg\":\"saved\""),
        "{}",
        stderr(&saved)
    );
    // The file is on the pod's node, where the command ran.
    run(&fleet, "cp-1", "root", "test -s /var/lib/etcd/api-test.db");
    let status = exec(&[
        "etcdctl",
        "snapshot",
        "status",
        "/var/lib/etcd/api-test.db",
        "-w",
        "json",
    ]);
    assert!(status.status.success(), "{}", stderr(&status));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&status)).unwrap();
    assert!(
        doc["revision"].as_u64().is_some() && doc["totalSize"].as_u64().is_some(),
        "{doc}"
    );
    // A failing command: its stderr, then kubectl's own line and exit code.
    // Without certificates the real etcdctl retries until its command
    // timeout (none by default for `snapshot save`), then exits 5.
    let failed = exec(&[
        "etcdctl",
        "--command-timeout=2s",
        "snapshot",
        "save",
        "/var/lib/etcd/x.db",
    ]);
    assert_eq!(failed.status.code(), Some(5), "{}", stderr(&failed));
    assert!(
        stderr(&failed)
            .ends_with("Error: context deadline exceeded\ncommand terminated with exit code 5\n"),
        "{}",
        stderr(&failed)
    );
    // A node identity may not exec.
    let Some(w1) = kubectl(&fleet, 33, "w-1") else {
        return;
    };
    let o = w1.run(&[
        "-n",
        "kube-system",
        "exec",
        "etcd-cp-1",
        "--",
        "etcdctl",
        "version",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("User \"system:node:w-1\" cannot create resource \"pods/exec\" in API group \"\" in the namespace \"kube-system\""),
        "{}",
        stderr(&o)
    );
}

#[test]
fn in_ha_the_endpoint_reaches_an_instance_that_is_up() {
    let fleet = start(
        fleetsim::Scenario::new()
            .control_planes(2)
            .workers(1)
            .kubernetes("v1.34.2")
            .boot_delay(1.0),
    );
    let Some(k) = kubectl(&fleet, 33, "admin") else {
        return;
    };
    let id = crate::common::boot_id(&fleet, "cp-1");
    // It stays down until released, however slow the checks below.
    fleet
        .faults(|f| f.hang_on_reboot.push("cp-1".into()))
        .unwrap();
    let _ = fleet.ssh("cp-1", "root", "reboot");
    fleet.wait_down("cp-1").unwrap();
    // Past the manager's poll, every new connection goes to cp-2.
    thread::sleep(Duration::from_millis(300));
    let cp1 = fleet.address("cp-1").unwrap();
    assert!(std::net::TcpStream::connect((cp1.as_str(), 6443)).is_err());
    for _ in 0..5 {
        assert_eq!(
            lines(&k.ok(&["get", "nodes", "-o", "name"])),
            ["node/cp-1", "node/cp-2", "node/w-1"]
        );
    }
    let status = k.ok(&[
        "get",
        "node",
        "cp-1",
        "-o",
        "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}",
    ]);
    assert_eq!(status, "Unknown", "a node that is down posts no status");
    let waiting = k
        .command(&[
            "wait",
            "--for=condition=Ready",
            "node/cp-1",
            "--timeout=30s",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    thread::sleep(Duration::from_millis(500));
    fleet.release("cp-1").unwrap();
    // Ready again, seen through a watch: kubectl wait lists, then watches.
    let waited = waiting.wait_with_output().unwrap();
    assert!(waited.status.success(), "{}", stderr(&waited));
    assert_eq!(stdout(&waited), "node/cp-1 condition met\n");
    assert_ne!(crate::common::boot_id(&fleet, "cp-1"), id);
}

#[test]
fn rooks_toolbox_answers_ceph_through_the_real_kubectl_exec() {
    let fleet = start(small(3).ceph(|c| {
        c.recovery = 0.5;
        c.warnings = vec!["AUTH_INSECURE_GLOBAL_ID_RECLAIM_ALLOWED".into()];
    }));
    let Some(k) = kubectl(&fleet, 33, "admin") else {
        return;
    };
    let ceph = |words: &[&str]| {
        let mut args = vec![
            "-n",
            "rook-ceph",
            "exec",
            "rook-ceph-tools-7b75b967db-x8kzq",
            "--",
            "ceph",
        ];
        args.extend_from_slice(words);
        k.run(&args)
    };
    // Until every kubelet runs and the OSDs have recovered from the boot.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let o = ceph(&["pg", "stat", "--format", "json"]);
        let clean = o.status.success() && {
            let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
            v["pg_summary"]["num_pg_by_state"]
                == serde_json::json!([{"name": "active+clean", "num": 32}])
        };
        if clean {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "Ceph never got clean: {}{}",
            stdout(&o),
            stderr(&o)
        );
        thread::sleep(Duration::from_millis(500));
    }
    let list = k.run(&["get", "cephclusters", "-A", "-o", "json"]);
    assert!(list.status.success(), "{}", stderr(&list));
    let v: serde_json::Value = serde_json::from_str(&stdout(&list)).unwrap();
    let status = &v["items"][0]["status"]["ceph"];
    assert_eq!(status["health"], "HEALTH_WARN", "{v:#}");
    assert_eq!(
        status["details"]["AUTH_INSECURE_GLOBAL_ID_RECLAIM_ALLOWED"]["severity"],
        "HEALTH_WARN"
    );

    // One host's OSD may stop; two of three would leave PGs below min_size:
    // the report on stdout, Ceph's EBUSY on stderr, kubectl's exit code 16.
    let one = ceph(&["osd", "ok-to-stop", "0", "--format", "json"]);
    assert!(one.status.success(), "{}", stderr(&one));
    let v: serde_json::Value = serde_json::from_str(&stdout(&one)).unwrap();
    assert_eq!(v["ok_to_stop"], true);
    let two = ceph(&["osd", "ok-to-stop", "0", "1", "--format", "json"]);
    assert_eq!(two.status.code(), Some(16), "{}", stderr(&two));
    let v: serde_json::Value = serde_json::from_str(&stdout(&two)).unwrap();
    assert_eq!(v["ok_to_stop"], false);
    assert_eq!(v["num_not_ok_pgs"], 32);
    assert!(
        stderr(&two).ends_with(
            "Error EBUSY: unsafe to stop osd(s) at this time (32 PGs are or would become offline)\n\
             command terminated with exit code 16\n"
        ),
        "{}",
        stderr(&two)
    );

    // An injected HEALTH_ERR shows at once in the toolbox.
    fleet
        .faults(|f| f.ceph_health_err = Some("OSD_FULL".into()))
        .unwrap();
    let health = ceph(&["health", "detail", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&health)).unwrap();
    assert_eq!(v["status"], "HEALTH_ERR");
    assert_eq!(v["checks"]["OSD_FULL"]["severity"], "HEALTH_ERR");
}
