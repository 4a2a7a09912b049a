//! The containerd sysext as the bakery names, pins and serves it, merged at
//! boot like kubernetes, and what a pin that matches nothing does.

use crate::common::{boot_id, run, small, start};

#[test]
fn containerd_is_the_bakerys_sysext_updated_by_sysupdate_and_merged_at_boot() {
    let mut scenario = small(1);
    scenario.containerd = Some("2.1.4".into());
    scenario.hub.containerd = vec!["2.1.5".into(), "2.2.0".into()];
    let fleet = start(scenario);
    let version = |node: &str| run(&fleet, node, "root", "containerd --version");
    assert!(version("w-1").starts_with("containerd github.com/containerd/containerd/v2 v2.1.4 "));
    let links = run(
        &fleet,
        "w-1",
        "root",
        "readlink /etc/extensions/containerd.raw /etc/extensions/containerd-flatcar.raw; \
         grep MatchPattern /etc/sysupdate.containerd.d/containerd.conf",
    );
    assert_eq!(
        links,
        "/opt/extensions/containerd/containerd-2.1.4-x86-64.raw\n/dev/null\nMatchPattern=containerd-2.1.@v-%a.raw\n"
    );
    let sums = run(
        &fleet,
        "w-1",
        "root",
        &format!("curl -fsS {}/containerd/SHA256SUMS", fleet.hub_url()),
    );
    let names: Vec<&str> = sums
        .lines()
        .map(|l| l.split_whitespace().nth(1).unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "containerd-2.1.4-x86-64.raw",
            "containerd-2.1.5-x86-64.raw",
            "containerd-2.2.0-x86-64.raw"
        ]
    );
    // The pin takes the newest 2.1 patch; staged is not running.
    run(
        &fleet,
        "w-1",
        "root",
        "/usr/lib/systemd/systemd-sysupdate -C containerd update",
    );
    assert_eq!(
        run(
            &fleet,
            "w-1",
            "root",
            "readlink -f /etc/extensions/containerd.raw"
        ),
        "/opt/extensions/containerd/containerd-2.1.5-x86-64.raw\n"
    );
    assert!(version("w-1").contains(" v2.1.4 "));
    let id = boot_id(&fleet, "w-1");
    let _ = fleet.ssh("w-1", "root", "reboot");
    fleet.wait_rebooted("w-1", &id).unwrap();
    assert!(version("w-1").contains(" v2.1.5 "));
    assert_eq!(fleet.boot("w-1").unwrap().containerd, "2.1.5");
    // A pin written the kubernetes way, with a `v`, matches nothing the
    // bakery publishes: sysupdate finds no candidate and changes nothing.
    let out = run(
        &fleet,
        "cp-1",
        "root",
        "sed -i 's/^MatchPattern=.*/MatchPattern=containerd-v2.1.@v-%a.raw/' /etc/sysupdate.containerd.d/containerd.conf; \
         /usr/lib/systemd/systemd-sysupdate -C containerd update 2>&1; echo \"exit $?\"; ls /opt/extensions/containerd",
    );
    assert!(
        out.contains("No update needed.\nexit 0\ncontainerd-2.1.4-x86-64.raw\n"),
        "{out}"
    );
}

#[test]
fn without_a_containerd_sysext_a_node_runs_flatcars_own() {
    let fleet = start(small(0));
    let out = run(
        &fleet,
        "cp-1",
        "root",
        "containerd --version; ls /etc/extensions; ls /etc/sysupdate.containerd.d 2>&1 || true",
    );
    assert!(
        out.starts_with("containerd github.com/containerd/containerd v1.7.23 "),
        "{out}"
    );
    assert!(!out.contains("containerd.raw"), "{out}");
}
