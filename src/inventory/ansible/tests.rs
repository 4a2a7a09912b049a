use std::path::Path;

use super::*;
use crate::inventory::Role;

/// A kubespray-like layout: hosts under `all`, roles by group, versions in
/// group_vars/all.yml, a bastion for everyone, one host's port in host_vars.
fn layout(dir: &Path) -> PathBuf {
    let inv = dir.join("inventory.yaml");
    std::fs::write(
        &inv,
        "all:\n\
         \x20 hosts:\n\
         \x20   cp-1: {ansible_host: 10.0.0.11}\n\
         \x20   w-1:\n\
         \x20     ansible_host: 10.0.0.21\n\
         \x20   w-2: {ansible_host: 10.0.0.22, ansible_user: root}\n\
         \x20   bastion: {ansible_host: 192.0.2.1}\n\
         \x20 vars:\n\
         \x20   ansible_user: core\n\
         \x20 children:\n\
         \x20   k8s_cluster:\n\
         \x20     vars:\n\
         \x20       ansible_port: 2200\n\
         \x20     children:\n\
         \x20       kube_control_plane:\n\
         \x20         hosts: {cp-1: }\n\
         \x20       kube_node:\n\
         \x20         hosts:\n\
         \x20           w-1:\n\
         \x20           w-2:\n",
    )
    .unwrap();
    std::fs::create_dir_all(dir.join("group_vars/all")).unwrap();
    std::fs::write(
        dir.join("group_vars/all/versions.yml"),
        "kubernetes_version: v1.37.2\ncontainerd_version: '2.1'\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("group_vars/all/ssh.yaml"),
        "ansible_ssh_common_args: '-o ProxyCommand=\"ssh -W %h:%p -q ops@192.0.2.1\"'\n",
    )
    .unwrap();
    std::fs::create_dir_all(dir.join("host_vars")).unwrap();
    std::fs::write(dir.join("host_vars/w-1.yml"), "ansible_port: 2222\n").unwrap();
    inv
}

fn read(path: &Path) -> Result<Inventory, String> {
    let text = std::fs::read_to_string(path).unwrap();
    let kind = kind(&text);
    load(&text, path, kind, Some(Path::new("/home/op")), None).map(|(i, _)| i)
}

#[test]
fn a_kubespray_layout_reads_with_ansibles_precedence() {
    let dir = tempfile::tempdir().unwrap();
    let inv = read(&layout(dir.path())).unwrap();
    let names: Vec<(&str, Role)> = inv
        .nodes
        .iter()
        .map(|n| (n.name.as_str(), n.role))
        .collect();
    // The bastion is in no Kubernetes group: not a node.
    assert_eq!(
        names,
        [
            ("cp-1", Role::ControlPlane),
            ("w-1", Role::Worker),
            ("w-2", Role::Worker)
        ]
    );
    assert_eq!(inv.kubernetes_version.to_string(), "v1.37");
    assert_eq!(inv.containerd_version.unwrap().to_string(), "v2.1");
    let node = |n: &str| inv.nodes.iter().find(|x| x.name == n).unwrap();
    // group k8s_cluster's 2200 < host_vars/w-1.yml's 2222.
    assert_eq!(node("cp-1").port, Some(2200));
    assert_eq!(node("w-1").port, Some(2222));
    // all's `core` < the host's inline `root`.
    assert_eq!(node("cp-1").user.as_deref(), Some("core"));
    assert_eq!(node("w-2").user.as_deref(), Some("root"));
    assert_eq!(node("w-1").address, "10.0.0.21");
    let jump = inv.ssh.jump.unwrap();
    assert_eq!(
        (jump.user.as_deref(), jump.host.as_str()),
        (Some("ops"), "192.0.2.1")
    );
    // Where it came from, for `status -v`.
    let port = inv
        .provenance
        .iter()
        .find(|p| p.node == "w-1" && p.setting == "port")
        .unwrap();
    assert!(port.from.contains("host_vars/w-1.yml:1:"), "{port:?}");
}

#[test]
fn group_vars_all_beats_a_groups_vars_in_the_file() {
    // Ansible's VARIABLE_PRECEDENCE: groups_inventory < all_plugins_inventory.
    let dir = tempfile::tempdir().unwrap();
    let inv = layout(dir.path());
    std::fs::write(
        dir.path().join("group_vars/all/port.yml"),
        "ansible_port: 2300\n",
    )
    .unwrap();
    let read = read(&inv).unwrap();
    let cp = read.nodes.iter().find(|n| n.name == "cp-1").unwrap();
    assert_eq!(cp.port, Some(2300));
    // A group_vars/<group> file beats group_vars/all.
    std::fs::write(
        dir.path().join("group_vars/kube_control_plane.yml"),
        "ansible_port: 2400\n",
    )
    .unwrap();
    let read = super::tests::read(&inv).unwrap();
    let cp = read.nodes.iter().find(|n| n.name == "cp-1").unwrap();
    assert_eq!(cp.port, Some(2400));
}

#[test]
fn a_template_is_refused_naming_file_line_host_and_variable() {
    let dir = tempfile::tempdir().unwrap();
    let inv = layout(dir.path());
    std::fs::write(
        dir.path().join("host_vars/w-2.yml"),
        "# w-2\nansible_host: \"{{ lookup('env', 'W2') }}\"\n",
    )
    .unwrap();
    let e = read(&inv).unwrap_err();
    assert!(e.contains("host_vars/w-2.yml:2:"), "{e}");
    assert!(e.contains("host `w-2`: ansible_host"), "{e}");
    assert!(e.contains("Jinja2"), "{e}");
}

#[test]
fn a_version_written_as_a_number_is_refused_with_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let inv = layout(dir.path());
    std::fs::write(
        dir.path().join("group_vars/all/versions.yml"),
        "kubernetes_version: 1.30\n",
    )
    .unwrap();
    let e = read(&inv).unwrap_err();
    assert!(e.contains("versions.yml:1:"), "{e}");
    assert!(e.contains("write the version quoted"), "{e}");
}

#[test]
fn a_disagreeing_fleetctl_role_is_an_error_naming_both() {
    let dir = tempfile::tempdir().unwrap();
    let inv = layout(dir.path());
    std::fs::write(
        dir.path().join("host_vars/cp-1.yml"),
        "fleetctl_role: worker\n",
    )
    .unwrap();
    let e = read(&inv).unwrap_err();
    assert!(e.contains("fleetctl_role says worker"), "{e}");
    assert!(e.contains("group kube_control_plane"), "{e}");
}

#[test]
fn fleet_wide_values_must_agree() {
    let dir = tempfile::tempdir().unwrap();
    let inv = layout(dir.path());
    std::fs::write(
        dir.path().join("host_vars/w-2.yml"),
        "kubernetes_version: v1.36\n",
    )
    .unwrap();
    let e = read(&inv).unwrap_err();
    assert!(e.contains("kubernetes_version differs"), "{e}");
    assert!(e.contains("host_vars/w-2.yml:1:"), "{e}");
}

#[test]
fn unsupported_ssh_args_and_connections_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let inv = layout(dir.path());
    std::fs::write(
        dir.path().join("group_vars/all/ssh.yaml"),
        "ansible_ssh_common_args: -o ForwardAgent=yes\n",
    )
    .unwrap();
    let e = read(&inv).unwrap_err();
    assert!(e.contains("ansible_ssh_common_args"), "{e}");
    assert!(e.to_lowercase().contains("forwardagent"), "{e}");
    std::fs::write(dir.path().join("group_vars/all/ssh.yaml"), "").unwrap();
    std::fs::write(
        dir.path().join("host_vars/w-2.yml"),
        "ansible_connection: docker\n",
    )
    .unwrap();
    let e = read(&inv).unwrap_err();
    assert!(e.contains("host `w-2`: ansible_connection"), "{e}");
}

#[test]
fn bad_yaml_names_file_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let inv = dir.path().join("inventory.yaml");
    std::fs::write(&inv, "all:\n  hosts:\n    cp-1:\n  childs:\n    x: {}\n").unwrap();
    let e = read(&inv).unwrap_err();
    assert!(e.contains("inventory.yaml:4:"), "{e}");
    assert!(e.contains("childs"), "{e}");
}

#[test]
fn a_group_loop_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let inv = dir.path().join("inventory.yaml");
    std::fs::write(
        &inv,
        "all:\n  children:\n    a:\n      children:\n        b:\n    b:\n      children:\n        a:\n",
    )
    .unwrap();
    let e = read(&inv).unwrap_err();
    assert!(e.contains("loop"), "{e}");
}

#[test]
fn the_listing_of_ansible_inventory_is_read() {
    let json = r#"{
      "_meta": {"hostvars": {
        "cp-1": {"ansible_host": "10.0.0.11", "kubernetes_version": "v1.37"},
        "w-1": {"ansible_host": "10.0.0.21", "ansible_port": 2222, "kubernetes_version": "v1.37"},
        "lb": {"ansible_host": "10.0.0.5"}
      }},
      "all": {"children": ["ungrouped", "k8s_cluster"]},
      "k8s_cluster": {"children": ["kube_control_plane", "kube_node"]},
      "kube_control_plane": {"hosts": ["cp-1"]},
      "kube_node": {"hosts": ["w-1"]},
      "ungrouped": {"hosts": ["lb"]}
    }"#;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("inventory.json");
    std::fs::write(&path, json).unwrap();
    let inv = read(&path).unwrap();
    let names: Vec<&str> = inv.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["cp-1", "w-1"]);
    assert_eq!(inv.nodes[1].port, Some(2222));
    assert!(
        inv.provenance
            .iter()
            .any(|p| p.from.contains("_meta.hostvars.w-1"))
    );
}

#[test]
fn the_kinds_are_told_apart() {
    assert_eq!(
        kind("kubernetes_version: v1.37\nnodes:\n  - {}\n"),
        InventoryKind::Fleetctl
    );
    assert_eq!(kind("all:\n  hosts:\n    a:\n"), InventoryKind::AnsibleYaml);
    assert_eq!(kind("{\"_meta\": {}}"), InventoryKind::AnsibleJson);
    assert!(matches!(
        kind("[kube_node]\nw-1\n"),
        InventoryKind::NeedsAnsible(_)
    ));
    assert!(matches!(
        kind("plugin: aws_ec2\n"),
        InventoryKind::NeedsAnsible(_)
    ));
}

#[test]
fn an_ini_inventory_without_ansible_says_how() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hosts.ini");
    std::fs::write(&path, "[kube_control_plane]\ncp-1\n").unwrap();
    let e = read(&path).unwrap_err();
    assert!(e.contains("INI"), "{e}");
    assert!(e.contains("ansible-inventory"), "{e}");
}

#[test]
fn a_vaulted_variable_fleetctl_reads_needs_ansible() {
    let dir = tempfile::tempdir().unwrap();
    let inv = layout(dir.path());
    std::fs::write(
        dir.path().join("host_vars/w-2.yml"),
        "db_password: !vault |\n  $ANSIBLE_VAULT;1.1;AES256\n  6162\nansible_user: !vault |\n  $ANSIBLE_VAULT;1.1;AES256\n  6364\n",
    )
    .unwrap();
    let e = read(&inv).unwrap_err();
    assert!(
        e.contains("host `w-2`'s ansible_user (") && e.contains("host_vars/w-2.yml:5:"),
        "{e}"
    );
}

#[test]
fn the_ansible_example_is_valid_and_says_what_it_shows() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("inventory.ansible.example.yaml");
    let inv = read(&path).expect("inventory.ansible.example.yaml must be valid");
    let names: Vec<&str> = inv.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["cp-1", "cp-2", "w-1", "w-2"]);
    assert_eq!(inv.nodes[3].port, Some(2222));
    assert_eq!(inv.nodes[2].zone.as_deref(), Some("eu-west-1a"));
    assert_eq!(inv.ssh.jump.as_ref().unwrap().host, "192.0.2.10");
    assert_eq!(inv.kubernetes_version.to_string(), "v1.37");
    assert_eq!(
        inv.nodes[0].identity_file.as_deref(),
        Some(Path::new("/home/op/.ssh/id_ed25519"))
    );
}
