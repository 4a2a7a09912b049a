//! systemd-sysupdate against a node root and an in-test hub.

use super::super::testutil::{Hub, Node, closed_port, image_body, image_name, list};
use super::*;

const DIR: &str = "/opt/extensions/kubernetes";
const LINK: &str = "/etc/extensions/kubernetes.raw";

fn conf(hub_url: &str, pattern: &str, instances_max: u32) -> String {
    format!(
        "[Transfer]\nVerify=false\n\n[Source]\nType=url-file\nPath={hub_url}kubernetes/\n\
         MatchPattern={pattern}\n\n[Target]\nInstancesMax={instances_max}\nType=regular-file\n\
         Path={DIR}\nCurrentSymlink={LINK}\n"
    )
}

fn pin(node: &Node, hub: &Hub, file: &str, pattern: &str) {
    node.write(
        &format!("/etc/sysupdate.kubernetes.d/{file}"),
        &conf(&hub.url(), pattern, 3),
    );
}

/// Installs images as if staged earlier and points the symlink at `current`.
fn installed(node: &Node, versions: &[&str], current: &str) {
    for v in versions {
        node.write(
            &format!("{DIR}/{}", image_name(v)),
            &String::from_utf8(image_body(v)).unwrap(),
        );
    }
    let link = node.path(LINK);
    std::fs::create_dir_all(link.parent().unwrap()).unwrap();
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(format!("../..{DIR}/{}", image_name(current)), &link).unwrap();
}

fn link_target(node: &Node) -> String {
    std::fs::read_link(node.path(LINK))
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

fn images(node: &Node) -> Vec<String> {
    list(&node.path(DIR))
}

fn update(node: &Node) -> super::super::testutil::Output {
    node.run("systemd-sysupdate", &["--component=kubernetes", "update"])
}

#[test]
fn a_pinned_pattern_takes_the_newest_patch_and_never_the_next_minor() {
    let hub = Hub::start();
    hub.publish(&["v1.37.1", "v1.37.10", "v1.37.9", "v1.38.0", "v1.38.1"]);
    let node = Node::worker("w1", "v1.37.1");
    installed(&node, &["v1.37.1"], "v1.37.1");
    pin(&node, &hub, "kubernetes.conf", "kubernetes-v1.37.@v-%a.raw");

    let r = update(&node);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains("Selected update '10' for install."),
        "{}",
        r.stderr
    );
    assert_eq!(
        link_target(&node),
        "../../opt/extensions/kubernetes/kubernetes-v1.37.10-x86-64.raw"
    );
    assert!(r.stderr.contains(
        "Updated symlink '/etc/extensions/kubernetes.raw' -> \
         '../../opt/extensions/kubernetes/kubernetes-v1.37.10-x86-64.raw'."
    ));
    assert_eq!(
        node.read(&format!("{DIR}/kubernetes-v1.37.10-x86-64.raw"))
            .as_bytes(),
        image_body("v1.37.10")
    );

    let again = update(&node);
    assert_eq!(again.code, 0);
    assert!(
        again.stderr.contains("No update needed."),
        "{}",
        again.stderr
    );
    assert!(images(&node).iter().all(|f| !f.contains("v1.38")));
    assert_eq!(
        link_target(&node),
        "../../opt/extensions/kubernetes/kubernetes-v1.37.10-x86-64.raw"
    );
}

#[test]
fn a_floating_pattern_stages_the_next_minor() {
    let hub = Hub::start();
    hub.publish(&["v1.37.2", "v1.38.0", "v1.38.1"]);
    let node = Node::worker("w1", "v1.37.2");
    installed(&node, &["v1.37.2"], "v1.37.2");
    pin(&node, &hub, "kubernetes.conf", "kubernetes-@v-%a.raw");

    let r = update(&node);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("Selected update 'v1.38.1' for install."));
    assert_eq!(
        link_target(&node),
        "../../opt/extensions/kubernetes/kubernetes-v1.38.1-x86-64.raw"
    );
}

#[test]
fn a_leftover_floating_conf_drags_a_pinned_node_to_another_series() {
    let hub = Hub::start();
    hub.publish(&["v1.37.2", "v1.37.3", "v1.38.1"]);
    let node = Node::worker("w1", "v1.37.2");
    installed(&node, &["v1.37.2"], "v1.37.2");
    pin(&node, &hub, "kubernetes.conf", "kubernetes-v1.37.@v-%a.raw");
    pin(&node, &hub, "old-kubernetes.conf", "kubernetes-@v-%a.raw");

    let r = update(&node);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        link_target(&node),
        "../../opt/extensions/kubernetes/kubernetes-v1.38.1-x86-64.raw"
    );
    let events = node.events();
    assert_eq!(events.len(), 1);
    assert_eq!(
        events[0].pins,
        ["kubernetes-v1.37.@v-%a.raw", "kubernetes-@v-%a.raw"]
    );
    assert_eq!(events[0].result, "ok");
    assert_eq!(
        events[0].argv,
        ["systemd-sysupdate", "--component=kubernetes", "update"]
    );
}

#[test]
fn a_checksum_mismatch_is_refused_and_changes_nothing() {
    let hub = Hub::start();
    hub.publish(&["v1.37.1", "v1.37.2"]);
    hub.corrupt("v1.37.2");
    let node = Node::worker("w1", "v1.37.1");
    installed(&node, &["v1.37.1"], "v1.37.1");
    pin(&node, &hub, "kubernetes.conf", "kubernetes-v1.37.@v-%a.raw");

    let r = update(&node);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr
            .contains("file did not check out, file has been tampered with."),
        "{}",
        r.stderr
    );
    assert_eq!(images(&node), [image_name("v1.37.1")]);
    assert_eq!(
        link_target(&node),
        "../../opt/extensions/kubernetes/kubernetes-v1.37.1-x86-64.raw"
    );
    assert_eq!(
        node.events()[0].result,
        "(sd-pull-raw) failed with exit status 1: Bad message"
    );
}

#[test]
fn instances_max_prunes_the_oldest_first() {
    let hub = Hub::start();
    hub.publish(&["v1.37.3"]);
    let node = Node::worker("w1", "v1.37.0");
    installed(&node, &["v1.37.0", "v1.37.1", "v1.37.2"], "v1.37.2");
    pin(&node, &hub, "kubernetes.conf", "kubernetes-v1.37.@v-%a.raw");
    let r = update(&node);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains(
        "Removing old '/opt/extensions/kubernetes/kubernetes-v1.37.0-x86-64.raw' (regular-file)."
    ));
    assert_eq!(
        images(&node),
        ["v1.37.1", "v1.37.2", "v1.37.3"].map(image_name)
    );
}

/// The lines of a run from "Selected update" on, without the glyphs.
fn from_selection(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .skip_while(|l| !l.starts_with("Selected update"))
        .map(|l| {
            l.trim_start_matches(|c: char| !c.is_ascii())
                .trim()
                .to_string()
        })
        .collect()
}

#[test]
fn room_is_made_before_the_download_and_the_booted_image_is_not_spared() {
    let hub = Hub::start();
    hub.publish(&["v1.37.3"]);
    let node = Node::worker("w1", "v1.37.0");
    // The node booted the oldest of three: the symlink does not protect it.
    // (The version is what `@v` matched: the patch.)
    installed(&node, &["v1.37.0", "v1.37.1", "v1.37.2"], "v1.37.0");
    pin(&node, &hub, "kubernetes.conf", "kubernetes-v1.37.@v-%a.raw");
    let r = update(&node);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let url = format!("{}kubernetes/{}", hub.url(), image_name("v1.37.3"));
    assert_eq!(
        from_selection(&r.stderr)[..5],
        [
            "Selected update '3' for install.".to_string(),
            "Making room for 1 updates...".to_string(),
            "Removing old '/opt/extensions/kubernetes/kubernetes-v1.37.0-x86-64.raw' (regular-file)."
                .to_string(),
            "Removed 1 instances.".to_string(),
            format!(
                "Acquiring {url} -> /opt/extensions/kubernetes/{}...",
                image_name("v1.37.3")
            ),
        ]
    );
    assert_eq!(
        images(&node),
        ["v1.37.1", "v1.37.2", "v1.37.3"].map(image_name)
    );
}

#[test]
fn what_the_clean_up_removed_stays_removed_when_the_download_fails() {
    let hub = Hub::start();
    hub.publish(&["v1.37.3"]);
    hub.corrupt("v1.37.3");
    let node = Node::worker("w1", "v1.37.0");
    installed(&node, &["v1.37.0", "v1.37.1", "v1.37.2"], "v1.37.0");
    pin(&node, &hub, "kubernetes.conf", "kubernetes-v1.37.@v-%a.raw");
    let r = update(&node);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("Removed 1 instances."), "{}", r.stderr);
    assert_eq!(images(&node), ["v1.37.1", "v1.37.2"].map(image_name));
    // The link now dangles: the next boot merges nothing.
    assert!(!node.path(LINK).exists());
}

#[test]
fn protect_version_and_the_version_being_installed_are_spared() {
    let hub = Hub::start();
    hub.publish(&["v1.37.2", "v1.37.3"]);
    let node = Node::worker("w1", "v1.37.0");
    installed(&node, &["v1.37.0", "v1.37.1", "v1.37.2"], "v1.37.0");
    node.write(
        "/etc/sysupdate.kubernetes.d/kubernetes.conf",
        &conf(&hub.url(), "kubernetes-v1.37.@v-%a.raw", 3)
            .replace("Verify=false\n", "Verify=false\nProtectVersion=0\n"),
    );
    let r = update(&node);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        images(&node),
        ["v1.37.0", "v1.37.2", "v1.37.3"].map(image_name)
    );

    // A specifier (%A: the booted IMAGE_VERSION) is not emulated.
    node.write(
        "/etc/sysupdate.kubernetes.d/kubernetes.conf",
        &conf(&hub.url(), "kubernetes-v1.37.@v-%a.raw", 3)
            .replace("Verify=false\n", "Verify=false\nProtectVersion=%A\n"),
    );
    let r = update(&node);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr
            .contains("fleetsim: unsupported: specifiers in ProtectVersion=")
    );
}

#[test]
fn uint64_max_instances_keeps_every_image_and_leftover_temporaries_go() {
    let hub = Hub::start();
    hub.publish(&["v1.37.3"]);
    let node = Node::worker("w1", "v1.37.0");
    installed(&node, &["v1.37.0", "v1.37.1", "v1.37.2"], "v1.37.0");
    node.write(
        &format!("{DIR}/.#sysupdatekubernetes-v1.37.9-x86-64.raw0123"),
        "partial",
    );
    node.write(
        "/etc/sysupdate.kubernetes.d/kubernetes.conf",
        &conf(&hub.url(), "kubernetes-v1.37.@v-%a.raw", 3)
            .replace("InstancesMax=3", "InstancesMax=18446744073709551615"),
    );
    let r = update(&node);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("Removed no instances."), "{}", r.stderr);
    assert_eq!(
        images(&node),
        ["v1.37.0", "v1.37.1", "v1.37.2", "v1.37.3"].map(image_name)
    );
    let leftovers: Vec<String> = std::fs::read_dir(node.path(DIR))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn an_unreachable_hub_fails_and_changes_nothing() {
    let node = Node::worker("w1", "v1.37.1");
    installed(&node, &["v1.37.1"], "v1.37.1");
    let closed = closed_port();
    node.write(
        "/etc/sysupdate.kubernetes.d/kubernetes.conf",
        &conf(
            &format!("http://127.0.0.1:{}/", closed.port),
            "kubernetes-v1.37.@v-%a.raw",
            3,
        ),
    );
    let r = update(&node);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr
            .contains("Transfer failed: Couldn't connect to server"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr
            .trim_end()
            .ends_with("(sd-pull) failed with exit status 1.")
    );
    assert_eq!(images(&node), [image_name("v1.37.1")]);
}

#[test]
fn a_missing_image_is_a_404_and_changes_nothing() {
    let hub = Hub::start();
    hub.publish(&["v1.37.2"]);
    hub.put(
        "kubernetes/SHA256SUMS",
        format!("{}  {}\n", "ab".repeat(32), image_name("v1.37.3")).into_bytes(),
    );
    let node = Node::worker("w1", "v1.37.2");
    installed(&node, &["v1.37.2"], "v1.37.2");
    pin(&node, &hub, "kubernetes.conf", "kubernetes-v1.37.@v-%a.raw");
    let r = update(&node);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains(&format!(
        "HTTP request to {}kubernetes/kubernetes-v1.37.3-x86-64.raw failed with code 404.",
        hub.url()
    )));
    assert_eq!(images(&node), [image_name("v1.37.2")]);
}

#[test]
fn missing_definitions_and_bad_configs_fail_like_the_real_tool() {
    let node = Node::worker("w1", "v1.37.1");
    let r = update(&node);
    assert_eq!(r.code, 1);
    assert_eq!(
        r.stderr.trim(),
        "No transfer definitions for component 'kubernetes' found."
    );
    node.write(
        "/etc/sysupdate.kubernetes.d/kubernetes.conf",
        "[Source]\nType=url-file\nPath=http://127.0.0.1:1/\nMatchPattern=kubernetes.raw\n",
    );
    let r = update(&node);
    assert_eq!(r.code, 1);
    assert_eq!(
        r.stderr.trim(),
        "/etc/sysupdate.kubernetes.d/kubernetes.conf:4: MatchPattern= string is not valid, refusing: kubernetes.raw"
    );
}

#[test]
fn a_manifest_without_a_text_marker_is_refused() {
    assert_eq!(
        parse_manifest(&format!("{}\tfile.raw\n", "a".repeat(64))),
        Err("Missing space separator at manifest line 1, refusing.".to_string())
    );
    assert_eq!(
        parse_manifest(&format!("{} xfile.raw\n", "a".repeat(64))),
        Err("Missing binary/text input marker at manifest line 1, refusing.".to_string())
    );
    assert_eq!(
        parse_manifest(&format!("{}é  file.raw\n", "a".repeat(63))),
        Err("Failed to parse digest at manifest line 1, refusing.".to_string())
    );
    assert_eq!(
        parse_manifest(&format!("{}  file.raw", "a".repeat(64))),
        Err("Truncated manifest file at line 1, refusing.".to_string())
    );
}

#[test]
fn list_shows_current_and_candidate() {
    let hub = Hub::start();
    hub.publish(&["v1.37.1", "v1.37.2", "v1.38.0"]);
    let node = Node::worker("w1", "v1.37.1");
    installed(&node, &["v1.37.1"], "v1.37.1");
    pin(&node, &hub, "kubernetes.conf", "kubernetes-v1.37.@v-%a.raw");
    let r = node.run("systemd-sysupdate", &["-C", "kubernetes", "list"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.stdout,
        "  VERSION INSTALLED AVAILABLE ASSESSMENT\n\
         + 2                 +         candidate\n\
         * 1       +         +         current\n"
    );
    assert!(node.events().is_empty(), "list does not mutate");
}

#[test]
fn unknown_verbs_are_unsupported() {
    let node = Node::worker("w1", "v1.37.1");
    let r = node.run("systemd-sysupdate", &["vacuum"]);
    assert_eq!(r.code, 1);
    assert_eq!(
        r.stderr.trim(),
        "fleetsim: unsupported: systemd-sysupdate vacuum"
    );
}

#[test]
fn relative_paths_climb_to_the_common_root() {
    assert_eq!(
        relative_path(
            Path::new("/etc/extensions"),
            Path::new("/opt/extensions/kubernetes/x.raw")
        ),
        PathBuf::from("../../opt/extensions/kubernetes/x.raw")
    );
    assert_eq!(
        relative_path(Path::new("/opt/a"), Path::new("/opt/a/b/x")),
        PathBuf::from("b/x")
    );
}

// ------------------------------------------------------- --definitions=DIR

/// The bakery's config pinned to `pattern`, without its CurrentSymlink= line.
fn download_only(hub: &Hub, pattern: &str) -> String {
    conf(&hub.url(), pattern, 3).replace(&format!("CurrentSymlink={LINK}\n"), "")
}

#[test]
fn definitions_from_a_directory_download_without_staging() {
    let hub = Hub::start();
    hub.publish(&["v1.34.2", "v1.35.0", "v1.35.3"]);
    let node = Node::worker("w1", "v1.34.2");
    installed(&node, &["v1.34.2"], "v1.34.2");
    pin(&node, &hub, "kubernetes.conf", "kubernetes-v1.34.@v-%a.raw");
    node.write(
        "/run/fleetctl-x1/kubernetes.conf",
        &download_only(&hub, "kubernetes-v1.35.@v-%a.raw"),
    );
    let r = node.run(
        "systemd-sysupdate",
        &["--definitions=/run/fleetctl-x1", "update"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains("Selected update '3' for install."),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("Updated symlink"), "{}", r.stderr);
    assert_eq!(images(&node), ["v1.34.2", "v1.35.3"].map(image_name));
    assert_eq!(
        link_target(&node),
        "../../opt/extensions/kubernetes/kubernetes-v1.34.2-x86-64.raw",
        "no CurrentSymlink=: nothing staged"
    );
    let e = node.events().pop().unwrap();
    assert_eq!(
        e.argv,
        [
            "systemd-sysupdate",
            "--definitions=/run/fleetctl-x1",
            "update"
        ]
    );
    assert_eq!(e.result, "ok");
    // Again: nothing newer for that pattern.
    let r = node.run(
        "systemd-sysupdate",
        &["--definitions", "/run/fleetctl-x1", "update"],
    );
    assert!(r.stderr.contains("No update needed."), "{}", r.stderr);
}

#[test]
fn transfer_files_come_before_conf_files() {
    let hub = Hub::start();
    hub.publish(&["v1.35.3", "v1.36.1"]);
    let node = Node::worker("w1", "v1.34.2");
    installed(&node, &["v1.34.2"], "v1.34.2");
    node.write(
        "/run/defs/a.conf",
        &download_only(&hub, "kubernetes-v1.36.@v-%a.raw"),
    );
    node.write(
        "/run/defs/b.transfer",
        &download_only(&hub, "kubernetes-v1.35.@v-%a.raw"),
    );
    let r = node.run("systemd-sysupdate", &["--definitions=/run/defs", "update"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(images(&node), ["v1.34.2", "v1.35.3"].map(image_name));
}

#[test]
fn definitions_and_component_do_not_combine() {
    let node = Node::worker("w1", "v1.34.2");
    let r = node.run(
        "systemd-sysupdate",
        &[
            "--definitions=/run/defs",
            "--component=kubernetes",
            "update",
        ],
    );
    assert_eq!(r.code, 1);
    assert_eq!(
        r.stderr,
        "The --definitions= and --component= switches may not be combined.\n"
    );
    let r = node.run("systemd-sysupdate", &["--definitions=/run/empty", "update"]);
    assert_eq!(
        (r.code, r.stderr.as_str()),
        (1, "No transfer definitions found.\n")
    );
    let r = node.run("systemd-sysupdate", &["--definitions=relative", "update"]);
    assert!(
        r.stderr.starts_with("fleetsim: unsupported: "),
        "{}",
        r.stderr
    );
}
