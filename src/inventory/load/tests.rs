use std::path::Path;

use super::*;
use crate::error::exit_code;
use crate::inventory::{Jump, Role};

const HOME: &str = "/home/op";

/// A minimal valid inventory, for tests that change one thing.
const MINIMAL: &str = "\
kubernetes_version: v1.37
nodes:
  - {name: cp-1, address: 10.0.0.11, role: control-plane}
";

fn parse_ok(text: &str) -> Inventory {
    match parse_located(
        text,
        Path::new("/etc/fleet/inventory.yaml"),
        Some(Path::new(HOME)),
    ) {
        Ok((inventory, _)) => inventory,
        Err(e) => panic!("expected a valid inventory, got:\n{e:#}"),
    }
}

/// The whole message, after checking it is a usage error (exit 2).
fn parse_err(text: &str) -> String {
    let err = parse_located(text, Path::new("inventory.yaml"), Some(Path::new(HOME)))
        .expect_err("expected the inventory to be refused");
    assert_eq!(exit_code(&err), 2, "not a usage error: {err:#}");
    format!("{err:#}")
}

#[test]
fn minimal_inventory_gets_every_default() {
    let inv = parse_ok(MINIMAL);
    assert_eq!(inv.kubernetes_version, Minor::new(1, 37));
    assert_eq!(inv.containerd_version, None);
    assert_eq!(inv.hub, DEFAULT_HUB);
    assert_eq!(
        inv.ssh,
        SshDefaults {
            user: None,
            port: None,
            identity_file: None,
            known_hosts: PathBuf::from("/home/op/.ssh/known_hosts"),
            host_key_checking: HostKeyChecking::Strict,
            jump: None,
        }
    );
    assert!(inv.health_checks.is_empty());
    assert_eq!(inv.nodes.len(), 1);
    assert_eq!(inv.first_control_plane().name, "cp-1");
    assert_eq!(inv.path, Path::new("/etc/fleet/inventory.yaml"));
}

#[test]
fn the_issue_example_parses_field_by_field() {
    let text = r#"
kubernetes_version: v1.37          # target minor series: the default for `plan`
containerd_version: v2.1           # optional
sysupdate:
  hub: https://extensions.flatcar.org/extensions/
ssh:
  user: core
  port: 22
  identity_file: ~/.ssh/id_ed25519
  known_hosts: ~/.ssh/known_hosts
  host_key_checking: accept-new
  jump: "ops@bastion:2200"
health_checks:
  - {name: etcd, command: "etcdctl endpoint health", expect: "is healthy"}
nodes:
  - {name: w-0,  address: 10.0.0.20, role: worker}
  - {name: cp-1, address: 10.0.0.11, role: control-plane}
  - {name: w-1,  address: 10.0.0.21, role: worker, port: 2222, user: root, identity_file: keys/w1}
"#;
    let inv = parse_ok(text);
    assert_eq!(inv.containerd_version, Some(Minor::new(2, 1)));
    assert_eq!(inv.hub, "https://extensions.flatcar.org/extensions");
    assert_eq!(inv.ssh.user.as_deref(), Some("core"));
    assert_eq!(inv.ssh.port, Some(22));
    assert_eq!(
        inv.ssh.identity_file.as_deref(),
        Some(Path::new("/home/op/.ssh/id_ed25519"))
    );
    assert_eq!(inv.ssh.host_key_checking, HostKeyChecking::AcceptNew);
    assert_eq!(
        inv.ssh.jump,
        Some(Jump {
            user: Some("ops".into()),
            host: "bastion".into(),
            port: Some(2200)
        })
    );
    assert_eq!(
        inv.health_checks,
        vec![HealthCheck {
            name: "etcd".into(),
            command: "etcdctl endpoint health".into(),
            expect: "is healthy".into(),
        }]
    );
    // The first control-plane node, not the first node.
    assert_eq!(inv.first_control_plane().name, "cp-1");
    let w1 = inv.node("w-1").expect("w-1 is listed");
    assert_eq!(w1.role, Role::Worker);
    assert_eq!((w1.port, w1.user.as_deref()), (Some(2222), Some("root")));
    // Relative to the inventory's directory, not the working directory.
    assert_eq!(
        w1.identity_file.as_deref(),
        Some(Path::new("/etc/fleet/keys/w1"))
    );
}

#[test]
fn example_file_in_the_repository_is_valid() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("inventory.example.yaml");
    let text = std::fs::read_to_string(&path).expect("inventory.example.yaml is readable");
    let inv = parse(&text, &path).expect("inventory.example.yaml must be valid");
    assert_eq!(inv.kubernetes_version, Minor::new(1, 37));
    assert_eq!(inv.containerd_version, Some(Minor::new(2, 1)));
    assert_eq!(inv.ssh.jump, None, "an empty jump means none");
    assert_eq!(inv.first_control_plane().name, "cp-1");
    assert_eq!(inv.nodes.len(), 4);
    assert_eq!(inv.health_checks.len(), 1);
}

#[test]
fn empty_jump_and_null_sections_mean_defaults() {
    let text = format!("{MINIMAL}ssh:\n  jump: \"\"\nsysupdate:\nhealth_checks:\n");
    let inv = parse_ok(&text);
    assert_eq!(inv.ssh.jump, None);
    assert_eq!(inv.hub, DEFAULT_HUB);
}

#[test]
fn unknown_key_is_reported_where_it_is() {
    let text = "\
kubernetes_version: v1.37
nodes:
  - name: cp-1
    adress: 10.0.0.11
    role: control-plane
";
    assert_eq!(
        parse_err(text),
        "inventory.yaml:4:5: unknown field `adress`, expected one of \
         name, address, role, port, user, identity_file, zone"
    );
}

#[test]
fn terminal_escapes_in_the_file_are_not_replayed() {
    let text = format!("{MINIMAL}\"evil\\e[31m\": 1\n");
    assert_eq!(
        parse_err(&text),
        "inventory.yaml:4:1: unknown field `evil\\u{1b}[31m`, expected one of \
         kubernetes_version, containerd_version, sysupdate, ssh, health_checks, kured, window, nodes"
    );
}

#[test]
fn problems_are_listed_in_file_order() {
    // Duplicates are found after each node's own checks, but reported in place.
    let text = "\
kubernetes_version: v1.37
nodes:
  - {name: cp-1, address: 10.0.0.11, role: control-plane}
  - {name: cp-1, address: 10.0.0.12, role: control-plane}
  - {name: w-1, address: 10.0.0.21, role: boss}
";
    assert_eq!(
        parse_err(text),
        "inventory.yaml:4:12: node name `cp-1` is used twice (first on line 3): \
         each node needs its own Kubernetes node name\n\
         inventory.yaml:5:43: node `w-1`: unknown role `boss`, expected `control-plane` \
         or `worker`"
    );
}

#[test]
fn unknown_top_level_key_is_refused() {
    let text = format!("{MINIMAL}kubernetes_versoin: v1.38\n");
    assert_eq!(
        parse_err(&text),
        "inventory.yaml:4:1: unknown field `kubernetes_versoin`, expected one of \
         kubernetes_version, containerd_version, sysupdate, ssh, health_checks, kured, window, nodes"
    );
}

#[test]
fn duplicate_yaml_key_is_refused() {
    let text = "\
kubernetes_version: v1.37
nodes:
  - {name: cp-1, address: 10.0.0.11, role: control-plane, name: cp-2}
";
    assert_eq!(
        parse_err(text),
        "inventory.yaml:3:59: duplicate mapping key `name` is not allowed here"
    );
}

#[test]
fn missing_required_key_is_named() {
    assert_eq!(
        parse_err("kubernetes_version: v1.37\n"),
        "inventory.yaml:1:1: missing field `nodes`"
    );
}

#[test]
fn yaml_syntax_error_has_a_location() {
    assert_eq!(
        parse_err("kubernetes_version: v1.37\nnodes: [\n"),
        "inventory.yaml:2:8: unclosed bracket '['"
    );
}

#[test]
fn port_out_of_range_says_what_a_port_is() {
    let text = "\
kubernetes_version: v1.37
nodes:
  - {name: cp-1, address: 10.0.0.11, role: control-plane, port: 70000}
";
    assert_eq!(
        parse_err(text),
        "inventory.yaml:3:65: invalid port: expected a number from 1 to 65535"
    );
}

#[test]
fn empty_file_is_explained() {
    let expected = "inventory.yaml: the file is empty: expected at least kubernetes_version \
                    and nodes (see inventory.example.yaml)";
    assert_eq!(parse_err(""), expected);
    assert_eq!(parse_err("  \n# only a comment\n\n"), expected);
}

#[test]
fn malformed_versions_are_refused_with_their_location() {
    let text = "\
kubernetes_version: v1.37.2
containerd_version: two
nodes:
  - {name: cp-1, address: 10.0.0.11, role: control-plane}
";
    assert_eq!(
        parse_err(text),
        "inventory.yaml:1:21: kubernetes_version: `v1.37.2` is not a minor version: \
         expected the form v1.37\n\
         inventory.yaml:2:21: containerd_version: `two` is not a minor version: \
         expected the form v1.37"
    );
}

#[test]
fn unquoted_minor_that_yaml_reads_as_a_float_keeps_its_text() {
    let inv = parse_ok(
        "kubernetes_version: 1.30\nnodes:\n  - {name: a, address: b, role: control-plane}\n",
    );
    assert_eq!(inv.kubernetes_version, Minor::new(1, 30));
}

#[test]
fn unknown_role_names_the_node() {
    let text = "\
kubernetes_version: v1.37
nodes:
  - {name: cp-1, address: 10.0.0.11, role: control-plane}
  - {name: w-1, address: 10.0.0.21, role: wroker}
";
    assert_eq!(
        parse_err(text),
        "inventory.yaml:4:43: node `w-1`: unknown role `wroker`, \
         expected `control-plane` or `worker`"
    );
}

#[test]
fn zones_are_label_values_and_named_by_node() {
    let inv = parse_ok(
        "\
kubernetes_version: v1.37
nodes:
  - {name: cp-1, address: 10.0.0.11, role: control-plane}
  - {name: w-1, address: 10.0.0.21, role: worker, zone: eu-west-1a}
",
    );
    assert_eq!(inv.nodes[0].zone, None);
    assert_eq!(inv.nodes[1].zone.as_deref(), Some("eu-west-1a"));
    let text = "\
kubernetes_version: v1.37
nodes:
  - {name: cp-1, address: 10.0.0.11, role: control-plane}
  - {name: w-1, address: 10.0.0.21, role: worker, zone: rack 7}
";
    assert_eq!(
        parse_err(text),
        "inventory.yaml:4:57: node `w-1`: zone `rack 7` is not a label value: \
         1 to 63 letters, digits, '-', '_' or '.'"
    );
}

#[test]
fn kured_is_a_namespace_and_a_daemonset_name() {
    let inv = parse_ok(&format!("{MINIMAL}kured: kured/kured\n"));
    assert_eq!(
        inv.kured.map(|k| k.to_string()).as_deref(),
        Some("kured/kured")
    );
    let err = parse_err(&format!("{MINIMAL}kured: kured\n"));
    assert!(
        err.starts_with("inventory.yaml:4:8: kured: `kured` does not name a DaemonSet"),
        "{err}"
    );
}

#[test]
fn a_window_is_read_as_kured_reads_its_own_or_refused_where_it_stands() {
    let inv = parse_ok(&format!("{MINIMAL}window: 'sat,sun 01:00-05:00'\n"));
    assert_eq!(
        inv.window.map(|w| w.to_string()).as_deref(),
        Some("Sat,Sun 01:00-05:00 UTC")
    );
    let err = parse_err(&format!("{MINIMAL}window: 'weekends 01:00-05:00'\n"));
    assert!(
        err.starts_with(
            "inventory.yaml:4:9: window: window \"weekends 01:00-05:00\": \"weekends\" is not a day"
        ),
        "{err}"
    );
}

#[test]
fn no_control_plane_node_is_refused() {
    let text = "\
kubernetes_version: v1.37
nodes:
  - {name: w-1, address: 10.0.0.21, role: worker}
";
    assert_eq!(
        parse_err(text),
        "inventory.yaml:3:3: nodes: no node has role `control-plane`: fleetctl upgrades \
         the control plane first and needs at least one"
    );
}

#[test]
fn no_nodes_at_all_is_refused() {
    assert_eq!(
        parse_err("kubernetes_version: v1.37\nnodes: []\n"),
        "inventory.yaml:2:8: nodes: the inventory lists no nodes: add at least one \
         control-plane node"
    );
}

#[test]
fn duplicate_names_point_at_the_second_and_name_the_first() {
    let text = "\
kubernetes_version: v1.37
nodes:
  - {name: cp-1, address: 10.0.0.11, role: control-plane}
  - {name: cp-1, address: 10.0.0.12, role: control-plane}
";
    assert_eq!(
        parse_err(text),
        "inventory.yaml:4:12: node name `cp-1` is used twice (first on line 3): \
         each node needs its own Kubernetes node name"
    );
}

#[test]
fn duplicate_address_means_same_address_and_port() {
    let text = "\
kubernetes_version: v1.37
ssh:
  port: 2222
nodes:
  - {name: cp-1, address: 10.0.0.11, role: control-plane}
  - {name: w-1, address: 10.0.0.11, role: worker, port: 2200}
  - {name: w-2, address: 10.0.0.11, role: worker, port: 2200}
  - {name: w-3, address: CP-host, role: worker, port: 22}
  - {name: w-4, address: cp-host, role: worker}
  - {name: w-5, address: cp-host, role: worker, port: 2222}
";
    // w-1 differs from cp-1 by port; w-2 repeats w-1. A node without a port
    // uses ssh.port (w-4 is not w-3, but w-5 is w-4), and host names compare
    // without case.
    assert_eq!(
        parse_err(text),
        "inventory.yaml:7:26: node `w-2`: address 10.0.0.11 port 2200 is also node \
         `w-1`'s (line 6): each node must be a different machine\n\
         inventory.yaml:10:26: node `w-5`: address cp-host port 2222 is also node \
         `w-4`'s (line 9): each node must be a different machine"
    );
}

#[test]
fn invalid_node_name_is_refused() {
    let text = "\
kubernetes_version: v1.37
nodes:
  - {name: CP_1, address: 10.0.0.11, role: control-plane}
";
    assert_eq!(
        parse_err(text),
        "inventory.yaml:3:12: node name `CP_1` is not a valid Kubernetes node name: use \
         lowercase letters, digits, '-' and '.', starting and ending each dot-separated \
         part with a letter or digit (RFC 1123)"
    );
}

#[test]
fn every_semantic_problem_is_reported_at_once() {
    let text = "\
kubernetes_version: v1.x
sysupdate:
  hub: extensions.flatcar.org
ssh:
  port: 0
  host_key_checking: yes
  jump: bastion:ssh
health_checks:
  - {name: etcd, command: true, expect: \"\"}
  - {name: etcd, command: \"\", expect: ok}
nodes:
  - {name: cp-1, address: \"10.0.0.11:22\", role: control-plane, user: \"\"}
  - {name: w-1, address: 10.0.0.21, role: worker, port: 0, identity_file: \"~bob/key\"}
";
    let expected = [
        "inventory.yaml:1:21: kubernetes_version: `v1.x` is not a minor version: expected the form v1.37",
        "inventory.yaml:3:8: sysupdate.hub `extensions.flatcar.org` is not an http(s) URL: expected e.g. https://extensions.flatcar.org/extensions",
        "inventory.yaml:5:9: ssh.port 0 is not a usable SSH port: expected 1 to 65535",
        "inventory.yaml:6:22: ssh.host_key_checking `yes` is unknown, expected `strict`, `accept-new` or `off`",
        "inventory.yaml:7:9: ssh.jump `bastion:ssh` has port `ssh`, which is not 1 to 65535: expected user@host:port",
        "inventory.yaml:9:41: health check `etcd`: expect is empty: every output contains the empty string, so the check could never fail",
        "inventory.yaml:10:12: health check `etcd` is defined twice (first on line 9)",
        "inventory.yaml:10:27: health check `etcd`: command is empty",
        "inventory.yaml:12:27: node `cp-1`: address `10.0.0.11:22` contains ':': put the port in `port:`, not in the address",
        "inventory.yaml:12:70: node `cp-1`: user is empty: remove the key to use the default",
        "inventory.yaml:13:57: node `w-1`: port 0 is not a usable SSH port: expected 1 to 65535",
        "inventory.yaml:13:75: node `w-1`: identity_file: `~bob/key`: ~user paths are not supported: write the full path",
    ];
    assert_eq!(parse_err(text), expected.join("\n"));
}

#[test]
fn tilde_without_home_is_an_error_not_a_guess() {
    let text = format!("{MINIMAL}ssh:\n  identity_file: ~/.ssh/id\n");
    let err = parse_located(&text, Path::new("inv.yaml"), None).expect_err("no HOME");
    assert_eq!(
        format!("{err:#}"),
        "inv.yaml: ssh.known_hosts: HOME is not set, so the default ~/.ssh/known_hosts \
         cannot be found: set ssh.known_hosts\n\
         inv.yaml:5:18: ssh.identity_file: `~/.ssh/id` starts with ~ but HOME is not set: \
         write the full path"
    );
}

#[test]
fn load_reads_the_file_and_checks_key_files() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("good_key"), "key").unwrap();
    std::fs::create_dir(dir.path().join("a_dir")).unwrap();
    let inventory = dir.path().join("inventory.yaml");
    let text = "\
kubernetes_version: v1.37
ssh:
  identity_file: good_key
nodes:
  - {name: cp-1, address: 10.0.0.11, role: control-plane, identity_file: missing_key}
  - {name: w-1, address: 10.0.0.21, role: worker, identity_file: a_dir}
";
    std::fs::write(&inventory, text).unwrap();
    let err = load(&inventory).expect_err("missing key file");
    assert_eq!(exit_code(&err), 2);
    let d = dir.path().display();
    let i = inventory.display();
    assert_eq!(
        format!("{err:#}"),
        format!(
            "{i}:5:74: node `cp-1`: identity_file {d}/missing_key cannot be read: \
             No such file or directory (os error 2)\n\
             {i}:6:66: node `w-1`: identity_file {d}/a_dir cannot be read: \
             it is not a regular file"
        )
    );

    std::fs::write(
        &inventory,
        text.replace("missing_key", "good_key")
            .replace("a_dir", "good_key"),
    )
    .unwrap();
    let inv = load(&inventory).expect("every key file is readable now");
    assert_eq!(inv.ssh.identity_file, Some(dir.path().join("good_key")));
}

#[test]
fn load_of_a_missing_file_is_a_usage_error() {
    let err = load(Path::new("/nonexistent/inventory.yaml")).expect_err("no such file");
    assert_eq!(exit_code(&err), 2);
    assert_eq!(
        format!("{err:#}"),
        "cannot read the inventory /nonexistent/inventory.yaml: No such file or directory \
         (os error 2); check the path, or start from inventory.example.yaml"
    );
}

mod load_properties {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn parse_never_panics_on_arbitrary_text(text in any::<String>()) {
            let _ = parse(&text, Path::new("inventory.yaml"));
        }

        #[test]
        fn parse_never_panics_on_yaml_shaped_text(
            text in "(kubernetes_version: v1\\.[0-9x]{1,3}\n)?(nodes:\n)?(  - \\{name: [a-zA-Z_.-]{0,6}, address: [0-9.:@a-z]{0,9}, role: (worker|control-plane|x)(, port: [0-9]{1,6})?\\}\n){0,4}(ssh:\n  jump: [a-z@:\\[\\]0-9]{0,12}\n)?"
        ) {
            let _ = parse(&text, Path::new("inventory.yaml"));
        }

        #[test]
        fn parse_never_panics_on_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
            let _ = parse(&String::from_utf8_lossy(&bytes), Path::new("inventory.yaml"));
        }

        #[test]
        fn any_error_is_a_usage_error(text in "[a-z_:\\- \n{}\\[\\],0-9.]{0,200}") {
            if let Err(e) = parse(&text, Path::new("inventory.yaml")) {
                prop_assert_eq!(exit_code(&e), 2);
            }
        }
    }
}

#[test]
fn shell_metacharacters_in_addresses_users_and_jump_hosts_are_refused_where_they_are() {
    let text = "\
kubernetes_version: v1.37
ssh:
  jump: \"ops@gw;id\"
nodes:
  - {name: cp-1, address: \"$(id)\", role: control-plane}
  - {name: w-1, address: 10.0.0.12, role: worker, user: \"core`id`\"}
";
    let err = parse_err(text);
    assert!(
        err.contains("inventory.yaml:3:9: ssh.jump `ops@gw;id` host `gw;id` contains ';'"),
        "{err}"
    );
    assert!(
        err.contains("inventory.yaml:5:27: node `cp-1`: address `$(id)` contains '$'"),
        "{err}"
    );
    assert!(
        err.contains("inventory.yaml:6:57: node `w-1`: user `core`id`` contains '`'"),
        "{err}"
    );
}
