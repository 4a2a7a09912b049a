//! Issue 40, item 2: OpenSSH certificates, against the simulated node's
//! real sshd configured with a user CA (`TrustedUserCAKeys`) and a host
//! certificate (`HostCertificate`), both signed by the real `ssh-keygen`.
//! fleetctl logs in with a key that is in no authorized_keys, on the
//! strength of its certificate alone; it trusts the node's host key through
//! a `@cert-authority` line alone; and an expired or wrong-principal
//! certificate, user or host, is refused with the reason named.

use std::path::{Path, PathBuf};
use std::process::Command;

use fleetsim::layout::{HOST_KEY, SSHD_CONFIG};

use super::support::{self, Fleet, Run, assert_has};

fn keygen(args: &[&str]) {
    let out = Command::new("ssh-keygen").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "ssh-keygen {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn new_key(path: &Path) {
    keygen(&[
        "-q",
        "-t",
        "ed25519",
        "-N",
        "",
        "-f",
        path.to_str().unwrap(),
    ]);
}

/// Signs `key.pub` with `ca`; returns the `-cert.pub` file ssh-keygen wrote.
fn sign(ca: &Path, key: &Path, extra: &[&str]) -> PathBuf {
    let mut args = vec!["-q", "-s", ca.to_str().unwrap(), "-I", "fleetctl-test"];
    args.extend_from_slice(extra);
    let public = format!("{}.pub", key.display());
    args.push(&public);
    keygen(&args);
    PathBuf::from(format!("{}-cert.pub", key.display()))
}

struct Cas {
    dir: PathBuf,
    user_ca: PathBuf,
    host_ca: PathBuf,
    address: String,
}

/// The node trusts `user_ca` for logins and presents a host certificate
/// signed by `host_ca` for its address (`principal` when given).
fn trust(fleet: &Fleet, host_principal: Option<&str>) -> Cas {
    let dir = fleet.dir().join("certs");
    std::fs::create_dir_all(&dir).unwrap();
    let (user_ca, host_ca) = (dir.join("user_ca"), dir.join("host_ca"));
    if !user_ca.exists() {
        new_key(&user_ca);
        new_key(&host_ca);
    }
    let address = fleet.address("cp-1").unwrap();
    let host_pub = fleet
        .ssh_ok("cp-1", "root", &format!("cat {HOST_KEY}.pub"))
        .unwrap();
    let host_key = dir.join("host_key");
    std::fs::write(format!("{}.pub", host_key.display()), host_pub).unwrap();
    let principal = host_principal.unwrap_or(&address).to_string();
    let cert = sign(
        &host_ca,
        &host_key,
        &["-h", "-n", &principal, "-V", "-5m:+1h"],
    );
    let user_ca_pub = std::fs::read_to_string(format!("{}.pub", user_ca.display())).unwrap();
    let host_cert = std::fs::read_to_string(&cert).unwrap();
    let script = format!(
        "set -e; printf '%s\\n' '{}' > /etc/ssh/user_ca.pub; printf '%s\\n' '{}' > {HOST_KEY}-cert.pub; \
         grep -q TrustedUserCAKeys {SSHD_CONFIG} || printf 'TrustedUserCAKeys /etc/ssh/user_ca.pub\\nHostCertificate {HOST_KEY}-cert.pub\\n' >> {SSHD_CONFIG}; \
         kill -HUP \"$(cat /run/sshd.pid)\"",
        user_ca_pub.trim(),
        host_cert.trim()
    );
    fleet.ssh_ok("cp-1", "root", &script).unwrap();
    // sshd re-executes itself on SIGHUP; the next login finds it listening.
    std::thread::sleep(std::time::Duration::from_millis(500));
    Cas {
        dir,
        user_ca,
        host_ca,
        address,
    }
}

/// An inventory for cp-1 that logs in as root with `key` and trusts host
/// keys only through the host CA.
fn inventory(fleet: &Fleet, cas: &Cas, key: &Path) -> PathBuf {
    let native = std::fs::read_to_string(fleet.inventory()).unwrap();
    let port = native
        .lines()
        .find_map(|l| l.trim().strip_prefix("port: "))
        .unwrap()
        .to_string();
    let known = cas.dir.join("known_hosts");
    let ca = std::fs::read_to_string(format!("{}.pub", cas.host_ca.display())).unwrap();
    std::fs::write(&known, format!("@cert-authority * {}", ca.trim())).unwrap();
    let file = cas.dir.join("inventory.yaml");
    std::fs::write(
        &file,
        format!(
            "kubernetes_version: v1.34\nsysupdate:\n  hub: {}\nssh:\n  user: root\n  port: {port}\n  \
             identity_file: {}\n  known_hosts: {}\nnodes:\n  - {{name: cp-1, address: {}, role: control-plane}}\n",
            fleet.hub_url(),
            key.display(),
            known.display(),
            cas.address
        ),
    )
    .unwrap();
    file
}

/// `fleetctl status`, with both streams in `stdout` (what a node's
/// connection failure says goes to either, depending on the path).
fn status(inventory: &Path) -> Run {
    let mut run = support::run(inventory, &["status"]);
    run.stdout.push_str(&run.stderr);
    run
}

#[test]
fn user_and_host_certificates_are_accepted_and_bad_ones_named() {
    let fleet = support::start(
        support::scenario()
            .control_planes(1)
            .workers(0)
            .kubernetes("v1.34.2"),
    );
    let cas = trust(&fleet, None);
    let key = cas.dir.join("operator");
    new_key(&key);
    let inv = inventory(&fleet, &cas, &key);

    // The key alone is in no authorized_keys: refused.
    let plain = status(&inv).expect_code(1);
    assert_has(&plain.stdout, &["unreachable"]);

    // With its certificate beside it (operator-cert.pub): in, and the host
    // key is trusted through the @cert-authority line alone.
    sign(&cas.user_ca, &key, &["-n", "root", "-V", "-5m:+1h"]);
    let ok = status(&inv).expect_code(0);
    assert_has(&ok.stdout, &["cp-1", "control-plane", "v1.34.2"]);

    // Expired, then for another principal: refused, the reason named.
    sign(
        &cas.user_ca,
        &key,
        &["-n", "root", "-V", "20200101:20200102"],
    );
    let expired = status(&inv).expect_code(1);
    assert_has(&expired.stdout, &["was refused: it expired (2020-01-02"]);
    sign(&cas.user_ca, &key, &["-n", "admin", "-V", "-5m:+1h"]);
    let wrong = status(&inv).expect_code(1);
    assert_has(
        &wrong.stdout,
        &["its principals (admin) do not include the user \"root\""],
    );

    // CertificateFile in ~/.ssh/config names a certificate kept elsewhere.
    std::fs::remove_file(format!("{}-cert.pub", key.display())).unwrap();
    let elsewhere = cas.dir.join("issued");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let other_key = elsewhere.join("operator");
    std::fs::copy(
        format!("{}.pub", key.display()),
        format!("{}.pub", other_key.display()),
    )
    .unwrap();
    let cert = sign(&cas.user_ca, &other_key, &["-n", "root", "-V", "-5m:+1h"]);
    let home = inv.parent().unwrap().join("home/.ssh");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(
        home.join("config"),
        format!(
            "Host *\n    GlobalKnownHostsFile /dev/null\n    CertificateFile {}\n",
            cert.display()
        ),
    )
    .unwrap();
    status(&inv).expect_code(0);

    // A `Match host` block applies (here it alone gives the port, once the
    // inventory no longer does); a `Match exec` is refused, never run.
    let text = std::fs::read_to_string(&inv).unwrap();
    let port_line = text
        .lines()
        .find(|l| l.trim().starts_with("port: "))
        .unwrap();
    let port = port_line.trim().trim_start_matches("port: ").to_string();
    std::fs::write(&inv, text.replace(&format!("{port_line}\n"), "")).unwrap();
    let config = |extra: &str| {
        format!(
            "Host *\n    GlobalKnownHostsFile /dev/null\n{extra}Match host 192.0.2.*\n    Port 1\n\
             Match host {},192.0.2.1\n    Port {port}\n    CertificateFile {}\n",
            cas.address,
            cert.display()
        )
    };
    std::fs::write(home.join("config"), config("")).unwrap();
    status(&inv).expect_code(0);
    let marker = cas.dir.join("exec-ran");
    std::fs::write(
        home.join("config"),
        config(&format!(
            "Match exec \"touch {}\"\n    User nobody\n",
            marker.display()
        )),
    )
    .unwrap();
    let refused = status(&inv).expect_code(2);
    assert_has(&refused.stdout, &["Match exec", "never runs `Match exec`"]);
    assert!(!marker.exists(), "a Match exec command ran");
    std::fs::write(home.join("config"), config("")).unwrap();

    // A host certificate for another name is refused, naming both names.
    trust(&fleet, Some("someone-else.example"));
    let host = status(&inv).expect_code(1);
    assert_has(
        &host.stdout,
        &[
            "the certificate is for someone-else.example, not for",
            &cas.address,
        ],
    );
}
