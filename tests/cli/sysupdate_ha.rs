//! Issue 14, parts 2 and 4: what real nodes do that a kind simulator did
//! not. systemd-sysupdate makes room before it downloads and does not
//! spare the image a node runs (fleetctl's downloads must keep it; a node
//! that already lost it is shown by `status` and never unstaged); and in
//! HA every kube-apiserver counts only the deprecated requests it served
//! itself, so the removed-API check must ask each one.

use fleetsim::state::DeprecatedApi;
use serde_json::Value;

use super::support::{self, Fleet, Scenario, assert_has};

/// `ls -1` of the node's kubernetes images.
fn images(fleet: &Fleet, node: &str) -> Vec<String> {
    fleet
        .ssh_ok(node, "root", "ls -1 /opt/extensions/kubernetes/")
        .unwrap()
        .lines()
        .map(String::from)
        .collect()
}

fn readlink(fleet: &Fleet, node: &str) -> String {
    fleet
        .ssh_ok(node, "root", "readlink /etc/extensions/kubernetes.raw")
        .unwrap()
        .trim()
        .to_string()
}

use super::support::run_on as run;

/// `fleetctl status --output json`, the node called `name`.
fn status_of(fleet: &Fleet, name: &str) -> (Value, Value) {
    let out = run(fleet, &["status", "--output", "json"]);
    let report = support::status_report(&out);
    let node = support::status_node(&report, name).clone();
    (report, node)
}

fn image(v: &str) -> String {
    format!("kubernetes-{v}-x86-64.raw")
}

#[test]
fn a_converge_on_a_node_that_holds_three_images_of_its_minor_keeps_the_running_image() {
    // w-1 runs the oldest of three v1.35 images: the bakery's InstancesMax=3
    // would have sysupdate remove it to make room for v1.35.3: the real
    // sysupdate's clean-up.
    let fleet = support::start(
        support::scenario()
            .control_planes(1)
            .workers(1)
            .kubernetes("v1.35.3")
            .with_node("w-1", |n| {
                n.running = Some("v1.35.0".into());
                n.images = vec!["v1.35.1".into(), "v1.35.2".into()];
            }),
    );
    assert_eq!(
        images(&fleet, "w-1"),
        ["v1.35.0", "v1.35.1", "v1.35.2"].map(image)
    );
    run(&fleet, &["plan", "v1.35"]).expect_code(0);
    // Stop the converge after w-1 is downloaded and staged, before its
    // reboot: the moment an unstage or a reboot by hand needs the old image.
    fleet.faults(|f| f.pdb_block = vec!["w-1".into()]).unwrap();
    let failed = support::apply(&fleet, &["--yes", "--drain-timeout", "2s"]).expect_code(1);
    assert_has(&failed.stderr, &["w-1: drain did not finish within 2s"]);
    assert!(
        images(&fleet, "w-1").contains(&image("v1.35.0")),
        "w-1 runs v1.35.0; its image must still be there: {:?}",
        images(&fleet, "w-1")
    );
    assert!(
        readlink(&fleet, "w-1").ends_with(&image("v1.35.3")),
        "{}",
        readlink(&fleet, "w-1")
    );
    let (_, w1) = status_of(&fleet, "w-1");
    assert_eq!(w1["facts"]["kubernetes"]["running"], "v1.35.0");
    assert!(w1["running_image_gone"].is_null(), "{w1}");

    fleet.faults(|f| f.pdb_block.clear()).unwrap();
    let done = support::apply(&fleet, &["--yes"]).expect_code(0);
    assert_has(&done.stderr, &["done:"]);
    let c = fleet.cluster().unwrap();
    assert_eq!(c.nodes["w-1"].kubelet_version, "v1.35.3");
}

#[test]
fn status_shows_a_node_whose_running_image_is_gone_and_it_is_never_unstaged() {
    // w-1 runs v1.34.2 with v1.35.0 staged (a node timer, or an earlier
    // run), and the v1.34.2 image was removed while merged.
    let fleet = support::start(
        support::scenario()
            .control_planes(1)
            .workers(1)
            .kubernetes("v1.34.2")
            .with_node("w-1", |n| n.staged = Some("v1.35.0".into())),
    );
    fleet
        .ssh_ok(
            "w-1",
            "root",
            &format!("rm /opt/extensions/kubernetes/{}", image("v1.34.2")),
        )
        .unwrap();

    let (report, w1) = status_of(&fleet, "w-1");
    assert_eq!(w1["running_image_gone"], "v1.34.2", "{w1}");
    let warnings = report["summary"]["warnings"].to_string();
    assert!(
        warnings.contains(
            "w-1: runs kubernetes v1.34.2, but its image is gone from /opt/extensions/kubernetes/"
        ),
        "{warnings}"
    );
    let (_, cp1) = status_of(&fleet, "cp-1");
    assert!(cp1["running_image_gone"].is_null(), "{cp1}");
    let table = run(&fleet, &["status"]);
    let row = table
        .stdout
        .lines()
        .find(|l| l.starts_with("w-1 "))
        .unwrap_or_default()
        .to_string();
    assert!(row.contains("(running image gone)"), "{}", table.stdout);

    // Its kubeadm step fails: pointing the symlink back at v1.34.2 would
    // leave it dangling, so fleetctl leaves it staged and says why.
    run(&fleet, &["plan", "v1.35"]).expect_code(0);
    let staged_before = readlink(&fleet, "w-1");
    fleet
        .faults(|f| f.fail_upgrade_node = vec!["w-1".into()])
        .unwrap();
    let failed = support::apply(&fleet, &["--yes"]).expect_code(1);
    assert_has(
        &failed.stderr,
        &[
            "w-1 was NOT unstaged: it runs kubernetes v1.34.2, but that image is gone from \
             /opt/extensions/kubernetes/",
            "Do not reboot w-1",
            "copy kubernetes-v1.34.2-x86-64.raw from",
        ],
    );
    assert!(
        !failed.stderr.contains("COULD NOT CHECK OR UNSTAGE"),
        "{}",
        failed.stderr
    );
    assert_eq!(readlink(&fleet, "w-1"), staged_before);
    assert!(
        images(&fleet, "w-1").contains(&image("v1.35.0")),
        "{:?}",
        images(&fleet, "w-1")
    );
}

/// Three control planes and a worker at v1.34.2; a client called an API
/// version v1.35 removes, served only by cp-2's kube-apiserver.
fn ha() -> Scenario {
    let mut s = support::scenario()
        .control_planes(3)
        .workers(1)
        .kubernetes("v1.34.2");
    s.deprecated_apis = vec![DeprecatedApi {
        group: "flowcontrol.apiserver.k8s.io".into(),
        version: "v1beta3".into(),
        resource: "flowschemas".into(),
        subresource: String::new(),
        removed_release: "1.35".into(),
        served_by: vec!["cp-2".into()],
    }];
    s
}

/// On one HA fleet: the deprecated API only cp-2's instance served blocks
/// the hop; then, with that client gone and cp-3's kube-apiserver cut off,
/// the check warns and names the instance it could not read.
#[test]
fn a_deprecated_api_served_only_by_the_second_control_plane_blocks_the_hop_and_an_unreachable_one_warns()
 {
    let fleet = support::start(ha());
    // What cp-1's own instance served does not know: only cp-2's does.
    // (admin.conf reaches the control-plane endpoint, which may hand the
    // request to any instance, as a load balancer does.)
    let cp1 = fleet.address("cp-1").unwrap();
    let own = fleet
        .ssh_ok(
            "cp-1",
            "root",
            &format!(
                "kubectl --kubeconfig /etc/kubernetes/admin.conf --server=https://{cp1}:6443 \
                 get --raw /metrics"
            ),
        )
        .unwrap();
    assert!(
        !own.contains("apiserver_requested_deprecated_apis"),
        "{own}"
    );

    let blocked = run(&fleet, &["plan", "v1.35"]).expect_code(2);
    let all = format!("{}\n{}", blocked.stdout, blocked.stderr);
    assert_has(
        &all,
        &[
            "BLOCK   removed-apis",
            "flowcontrol.apiserver.k8s.io/v1beta3 flowschemas (removed in v1.35), requested at cp-2",
            "--ignore-check removed-apis",
        ],
    );
    assert!(
        !fleet.dir().join(".fleetctl/plan.yaml").exists(),
        "a blocked plan is not saved"
    );

    // The client is gone (the gauge restarts with the API servers) and
    // cp-3's kube-apiserver no longer answers on its own address.
    fleet
        .shared()
        .update_cluster(|c| {
            c.deprecated_apis.clear();
            Ok(())
        })
        .unwrap();
    fleet
        .faults(|f| f.apiserver_unreachable = vec!["cp-3".into()])
        .unwrap();
    let cp3 = fleet.address("cp-3").unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::net::TcpStream::connect((cp3.as_str(), 6443)).is_ok() {
        assert!(
            std::time::Instant::now() < deadline,
            "cp-3's kube-apiserver still listens"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let text = run(&fleet, &["plan", "v1.35"]).expect_code(0);
    assert_has(
        &text.stdout,
        &[
            "warn    removed-apis",
            "1 of 3 kube-apiserver instance(s) could not be read",
            &format!(
                "cp-3 ({cp3}:6443): its kube-apiserver's /metrics could not be read, so the \
                 deprecated requests it served are unknown"
            ),
            &format!("The connection to the server {cp3}:6443 was refused"),
        ],
    );
}
