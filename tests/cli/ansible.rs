//! Issue 40, item 1: the cluster's own Ansible inventory, read as it is.
//! A kubespray-like layout (control plane and worker groups, versions in
//! `group_vars/all.yml`, the SSH settings in a group's vars file, a port in
//! `host_vars/`, a bastion in `ansible_ssh_common_args`) drives `status`,
//! `plan` and `apply` on a real-OS fleet; the real `ansible-inventory`
//! (Debian's ansible-core, installed by tests/run.sh) makes the `--list`
//! JSON fleetctl also reads, and reads an INI inventory for it.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::support::{self, Fleet, assert_has, assert_on_target, v};

/// The fleet's own inventory, as fleetctl reads it: addresses, port, key,
/// known_hosts and hub to write again in Ansible's terms.
fn native(fleet: &Fleet) -> fleetctl::inventory::Inventory {
    let path = fleet.inventory();
    let text = std::fs::read_to_string(&path).unwrap();
    fleetctl::inventory::parse(&text, &path).unwrap()
}

/// Writes the layout under `fleet.dir()/ansible/` and returns the
/// inventory file. `bastion`: reach the worker through the control plane's
/// sshd, as `-J` would through a real bastion.
fn layout(fleet: &Fleet, target: &str, bastion: bool) -> PathBuf {
    let inv = native(fleet);
    let dir = fleet.dir().join("ansible");
    std::fs::create_dir_all(dir.join("group_vars")).unwrap();
    std::fs::create_dir_all(dir.join("host_vars")).unwrap();
    let addr = |n: &str| {
        inv.nodes
            .iter()
            .find(|x| x.name == n)
            .unwrap()
            .address
            .clone()
    };
    let port = inv.ssh.port.unwrap();
    let file = dir.join("inventory.yaml");
    std::fs::write(
        &file,
        format!(
            "all:\n\
             \x20 hosts:\n\
             \x20   cp-1: {{ansible_host: {cp}}}\n\
             \x20   w-1:\n\
             \x20     ansible_host: {w}\n\
             \x20 children:\n\
             \x20   k8s_cluster:\n\
             \x20     children:\n\
             \x20       kube_control_plane:\n\
             \x20         hosts: {{cp-1: }}\n\
             \x20       kube_node:\n\
             \x20         hosts:\n\
             \x20           w-1:\n",
            cp = addr("cp-1"),
            w = addr("w-1"),
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("group_vars/all.yml"),
        format!(
            "# the one place to bump\nkubernetes_version: \"{target}\"\n\
             ansible_user: root\n\
             ansible_ssh_private_key_file: {key}\n\
             fleetctl_known_hosts: {kh}\n\
             fleetctl_hub: {hub}\n",
            key = inv.ssh.identity_file.as_ref().unwrap().display(),
            kh = inv.ssh.known_hosts.display(),
            hub = inv.hub,
        ),
    )
    .unwrap();
    let mut cluster = format!("ansible_port: {port}\n");
    if bastion {
        // As with `ssh -J`, the node's key is not the bastion's: OpenSSH
        // authenticates to the jump host with its own configuration, which
        // an operator keeps in ~/.ssh/config (support::fleetctl's HOME).
        let ssh = dir.join("home/.ssh");
        std::fs::create_dir_all(&ssh).unwrap();
        std::fs::write(
            ssh.join("config"),
            format!(
                "Host {}\n    IdentityFile {}\nHost *\n    GlobalKnownHostsFile /dev/null\n",
                addr("cp-1"),
                inv.ssh.identity_file.as_ref().unwrap().display()
            ),
        )
        .unwrap();
        cluster.push_str(&format!(
            "ansible_ssh_common_args: '-o ControlMaster=auto -J root@{}:{port}'\n",
            addr("cp-1")
        ));
    }
    std::fs::write(dir.join("group_vars/k8s_cluster.yml"), cluster).unwrap();
    std::fs::write(
        dir.join("host_vars/w-1.yml"),
        format!("ansible_port: '{port}'\n"),
    )
    .unwrap();
    file
}

#[test]
fn status_plan_and_apply_run_on_the_clusters_ansible_inventory() {
    let fleet = support::start(support::pair());
    let file = layout(&fleet, "v1.35", true);

    // A role the cluster's label contradicts stops everything, naming both.
    let text = std::fs::read_to_string(&file).unwrap();
    let swapped = text
        .replace(
            "kube_node:\n          hosts:\n            w-1:",
            "kube_node: {}",
        )
        .replace("hosts: {cp-1: }", "hosts: {cp-1: , w-1: }");
    assert_ne!(swapped, text, "the layout changed shape");
    std::fs::write(&file, &swapped).unwrap();
    let refused = support::run(&file, &["status"]).expect_code(2);
    assert_has(
        &refused.stderr,
        &[
            "w-1: the inventory makes it a control-plane",
            "group kube_control_plane",
            "does not have kubeadm's node-role.kubernetes.io/control-plane label",
        ],
    );
    std::fs::write(&file, &text).unwrap();

    // status through the bastion, and where each setting came from.
    let status = support::run(&file, &["status", "-v"]).expect_code(0);
    assert_has(&status.stdout, &["cp-1", "w-1", "v1.34.2"]);
    assert_has(
        &status.stderr,
        &[
            "w-1: role worker from group kube_node",
            "host_vars/w-1.yml:1:",
            "cp-1: port",
            "group_vars/k8s_cluster.yml:1:",
            "fleet: kubernetes_version v1.35 from kubernetes_version (",
            "group_vars/all.yml:2:",
        ],
    );

    // plan's default target is the inventory's kubernetes_version.
    support::run(&file, &["plan"]).expect_code(0);
    let plan = fleetctl::plan::load(&file.parent().unwrap().join(".fleetctl/plan.yaml")).unwrap();
    assert_eq!(plan.target.to_string(), "v1.35");

    // apply directly (a bastion that is itself a node it reboots would
    // come and go under its own connections; a real bastion does not).
    let direct = layout(&fleet, "v1.35", false);
    let applied = support::run(&direct, &["apply", "--yes", "--node-timeout", "120s"]);
    let applied = applied.expect_code(0);
    assert_has(&applied.stderr, &["every node runs v1.35"]);
    assert_on_target(&fleet, &["cp-1", "w-1"], &v("v1.35.3"));
}

/// The real `ansible-inventory`: its `--list` JSON of the same layout is
/// an inventory fleetctl reads, and an INI inventory is read through it
/// (said on stderr).
#[test]
fn the_listing_of_the_real_ansible_inventory_and_an_ini_file_are_read() {
    let fleet = support::start(support::pair());
    let file = layout(&fleet, "v1.35", false);
    let program = which("ansible-inventory")
        .expect("ansible-inventory (Debian's ansible-core) is installed by tests/run.sh");
    let out = Command::new(&program)
        .arg("-i")
        .arg(&file)
        .arg("--list")
        .env("HOME", file.parent().unwrap())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json = file.parent().unwrap().join("fleet.json");
    std::fs::write(&json, &out.stdout).unwrap();
    let status = support::run(&json, &["status", "-v"]).expect_code(0);
    assert_has(&status.stdout, &["cp-1", "w-1"]);
    assert_has(&status.stderr, &["fleet.json (_meta.hostvars.w-1)"]);

    let inv = native(&fleet);
    let node = |n: &str| {
        inv.nodes
            .iter()
            .find(|x| x.name == n)
            .unwrap()
            .address
            .clone()
    };
    let dir = file.parent().unwrap();
    let ini = dir.join("hosts.ini");
    std::fs::write(
        &ini,
        format!(
            "[kube_control_plane]\ncp-1 ansible_host={}\n[kube_node]\nw-1 ansible_host={}\n\
             [k8s_cluster:children]\nkube_control_plane\nkube_node\n",
            node("cp-1"),
            node("w-1")
        ),
    )
    .unwrap();
    let mut cmd = support::fleetctl(&ini, &["status"]);
    cmd.env("PATH", path_with(&program));
    let status = support::Run::of(cmd.output().unwrap()).expect_code(0);
    assert_has(&status.stdout, &["cp-1", "w-1"]);
    assert_has(
        &status.stderr,
        &["through `ansible-inventory --list` (it is an INI inventory)"],
    );

    // Without ansible-inventory, the same file is refused, saying how.
    let mut cmd = support::fleetctl(&ini, &["status"]);
    cmd.env("PATH", "/nonexistent");
    let refused = support::Run::of(cmd.output().unwrap()).expect_code(2);
    assert_has(
        &refused.stderr,
        &["ansible-inventory is not on PATH", "--list"],
    );
}

fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// PATH with `program`'s directory (ansible's Python finds itself through
/// its shebang, so nothing else is needed).
fn path_with(program: &Path) -> std::ffi::OsString {
    let dir = program.parent().unwrap_or(Path::new("/usr/bin"));
    std::env::join_paths([dir, Path::new("/usr/bin"), Path::new("/bin")]).unwrap()
}

/// Bad Ansible input is refused before any node is touched (there is no
/// fleet here to touch), every problem at once, each with file, line,
/// host and variable.
#[test]
fn bad_ansible_input_names_file_line_host_and_variable() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("inventory.yaml");
    std::fs::create_dir_all(dir.path().join("group_vars")).unwrap();
    std::fs::write(
        &file,
        "all:\n  children:\n    kube_control_plane:\n      hosts:\n        cp-1: {ansible_host: 192.0.2.1}\n\
         \x20   kube_node:\n      hosts:\n        w-1: {ansible_host: \"{{ w1_address }}\"}\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("group_vars/all.yml"),
        "kubernetes_version: 1.30\nansible_ssh_common_args: -o ForwardAgent=yes\n",
    )
    .unwrap();
    let run = support::run(&file, &["status"]).expect_code(2);
    assert_has(
        &run.stderr,
        &[
            "inventory.yaml:8:",
            "host `w-1`: ansible_host: is a Jinja2 template",
            "group_vars/all.yml:1:",
            "kubernetes_version: 1.3 is a number to YAML",
            "group_vars/all.yml:2:",
            "ansible_ssh_common_args: -o forwardagent is not an option fleetctl honours",
        ],
    );
}
