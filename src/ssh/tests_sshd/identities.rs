//! Who fleetctl is to a real sshd: identity files of each key type, ssh-agent,
//! IdentitiesOnly, passphrases, and a user whose sudo needs a password.

use super::*;

#[tokio::test]
async fn rsa_ecdsa_and_ed25519_identity_files_authenticate() {
    require_sshd!();
    let fx = Fixture::new();
    let keys: Vec<(&str, PathBuf)> = ["rsa", "ecdsa", "ed25519"]
        .into_iter()
        .map(|kind| (kind, fx.user_key(&format!("id_{kind}"), kind, "")))
        .collect();
    let sshd = fx.sshd("node", "");
    fx.trust(&sshd);
    for (kind, key) in &keys {
        let session = connect(
            &target(kind, &sshd, "root", &[key]),
            &fx.options(HostKeyChecking::Strict),
        )
        .await
        .unwrap_or_else(|e| panic!("{kind}: {e:#}"));
        assert_eq!(session.exec("echo ok", None).await.unwrap().stdout, "ok\n");
    }
    let log = sshd.log();
    for label in [
        "ssh2: RSA SHA256:",
        "ssh2: ECDSA SHA256:",
        "ssh2: ED25519 SHA256:",
    ] {
        assert!(log.contains(label), "{label} missing:\n{log}");
    }
    // OpenSSH 8.8+ refuses SHA-1 RSA signatures: this proves rsa-sha2 was negotiated.
    assert_eq!(sshd.accepted(), 3);
}

/// One ECDSA key in 256 has a private scalar OpenSSH stores in 31 bytes,
/// which the ssh-key crate alone refuses (see keyfile.rs). The CI run that
/// found it drew such a key in the test above.
#[tokio::test]
async fn an_ecdsa_key_whose_scalar_openssh_stored_short_authenticates() {
    require_sshd!();
    let fx = Fixture::new();
    let key = fx.path("id_ecdsa_short");
    std::fs::write(&key, super::keyfile::fixtures::SHORT).unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::write(
        key.with_extension("pub"),
        super::keyfile::fixtures::SHORT_PUB,
    )
    .unwrap();
    fx.authorize(&key);
    let sshd = fx.sshd("node", "");
    fx.trust(&sshd);
    let session = connect(
        &target("w-1", &sshd, "root", &[&key]),
        &fx.options(HostKeyChecking::Strict),
    )
    .await
    .unwrap_or_else(|e| panic!("{e:#}"));
    assert_eq!(session.exec("echo ok", None).await.unwrap().stdout, "ok\n");
    assert!(sshd.log().contains("ssh2: ECDSA SHA256:"), "{}", sshd.log());
}

#[tokio::test]
async fn wrong_key_and_passphrase_protected_key_fail_clearly() {
    require_sshd!();
    let fx = Fixture::new();
    let locked = fx.user_key("id_locked", "ed25519", "correct horse");
    let stranger = keygen(&fx.path("id_stranger"), "ed25519", "");
    let sshd = fx.sshd("node", "");
    fx.trust(&sshd);
    let t = target("w-5", &sshd, "root", &[&stranger, &locked]);
    let err = connect(&t, &fx.options(HostKeyChecking::Strict))
        .await
        .unwrap_err();
    let msg = format!("{err:#}");
    assert!(
        msg.starts_with(&format!(
            "w-5: authentication as \"root\" on 127.0.0.1:{} failed.",
            sshd.port
        )),
        "{msg}"
    );
    assert!(
        msg.contains(&format!(
            "Keys tried: {} (ED25519 SHA256:",
            stranger.display()
        )),
        "{msg}"
    );
    assert!(
        msg.contains(&format!("{} is passphrase-protected", locked.display())),
        "{msg}"
    );
    assert!(
        msg.contains(&format!("ssh-add {}", locked.display())),
        "{msg}"
    );
    assert!(msg.contains("authorized_keys"), "{msg}");
    assert_eq!(sshd.accepted(), 0);
}

/// `ssh-agent -D -a <sock>`, killed on drop.
struct Agent {
    child: Child,
    socket: PathBuf,
}

impl Agent {
    fn start(socket: PathBuf) -> Agent {
        let child = Command::new("ssh-agent")
            .arg("-D")
            .arg("-a")
            .arg(&socket)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        // The socket file appears at bind(), before listen(): a connection
        // in between is refused, so wait for one that is accepted.
        while std::os::unix::net::UnixStream::connect(&socket).is_err() {
            assert!(
                Instant::now() < deadline,
                "ssh-agent did not listen on its socket"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        Agent { child, socket }
    }

    fn add(&self, key: &Path) {
        run(Command::new("ssh-add")
            .arg(key)
            .env("SSH_AUTH_SOCK", &self.socket));
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn agent_identities_authenticate_without_identity_files() {
    require_sshd!();
    let fx = Fixture::new();
    let decoy = keygen(&fx.path("id_decoy"), "ecdsa", "");
    let key = fx.user_key("id_rsa", "rsa", "");
    let sshd = fx.sshd("node", "");
    fx.trust(&sshd);
    let agent = Agent::start(fx.path("agent.sock"));
    agent.add(&decoy);
    agent.add(&key);
    // Only the key file is gone from the picture: the agent must do it all.
    std::fs::remove_file(&key).unwrap();
    let opts = Options {
        agent_socket: Some(agent.socket.clone()),
        ..fx.options(HostKeyChecking::Strict)
    };
    let session = connect(&target("w-6", &sshd, "root", &[]), &opts)
        .await
        .unwrap();
    assert_eq!(session.exec("echo ok", None).await.unwrap().stdout, "ok\n");
    assert!(sshd.log().contains("ssh2: RSA SHA256:"), "{}", sshd.log());
}

/// A throwaway login user without sudo rights, removed on drop.
struct TempUser(String);

impl TempUser {
    fn create() -> Option<TempUser> {
        if Command::new("sudo").arg("-V").output().is_err()
            || Command::new("useradd").arg("-h").output().is_err()
        {
            return None;
        }
        let name = format!("fltest{}", std::process::id());
        // `*`: no password, yet not "locked" (sshd refuses locked accounts without PAM).
        run(Command::new("useradd").args(["-M", "-s", "/bin/sh", "-p", "*", &name]));
        Some(TempUser(name))
    }
}

impl Drop for TempUser {
    fn drop(&mut self) {
        let _ = Command::new("userdel").arg(&self.0).status();
    }
}

#[tokio::test]
async fn exec_root_as_a_user_whose_sudo_needs_a_password_says_so() {
    require_sshd!();
    let Some(user) = TempUser::create() else {
        eprintln!("skipping sudo test: sudo or useradd is missing");
        return;
    };
    let fx = Fixture::new();
    let key = fx.user_key("id_ed25519", "ed25519", "");
    let sshd = fx.sshd("node", "");
    fx.trust(&sshd);
    let session = connect(
        &target("w-9", &sshd, &user.0, &[&key]),
        &fx.options(HostKeyChecking::Strict),
    )
    .await
    .unwrap();
    assert!(!session.is_root());
    assert_eq!(
        session.exec("id -un", None).await.unwrap().stdout.trim(),
        user.0
    );
    let err = session.exec_root("id -u", None).await.unwrap_err();
    let sudo = err
        .downcast_ref::<SudoPasswordRequired>()
        .expect("SudoPasswordRequired");
    assert_eq!(sudo.user, user.0);
    let msg = err.to_string();
    assert!(
        msg.starts_with(&format!(
            "w-9: sudo needs a password for user \"{}\"",
            user.0
        )),
        "{msg}"
    );
    assert!(msg.contains("NOPASSWD"), "{msg}");
}

#[tokio::test]
async fn identities_only_keeps_the_agent_to_the_identity_files_keys() {
    require_sshd!();
    let fx = Fixture::new();
    let good = fx.user_key("id_good", "ed25519", "");
    let stranger = keygen(&fx.path("id_stranger"), "ed25519", "");
    let sshd = fx.sshd("node", "");
    fx.trust(&sshd);
    let agent = Agent::start(fx.path("agent.sock"));
    agent.add(&good);
    let opts = Options {
        agent_socket: Some(agent.socket.clone()),
        ..fx.options(HostKeyChecking::Strict)
    };

    // Without IdentitiesOnly the agent's key gets in, whatever the identity file.
    let mut t = target("w-15", &sshd, "root", &[&stranger]);
    connect(&t, &opts).await.unwrap();
    assert_eq!(sshd.accepted(), 1);

    // With it, only the stranger key is offered: refused, and the message says why.
    t.identities_only = true;
    let err = connect(&t, &opts).await.unwrap_err();
    let msg = format!("{err:#}");
    assert!(msg.contains("IdentitiesOnly is set for this host"), "{msg}");
    assert!(
        !msg.contains("ssh-agent key"),
        "the agent key was not offered: {msg}"
    );
    assert_eq!(sshd.accepted(), 1);

    // The agent still signs for a configured identity (only its .pub on disk).
    std::fs::remove_file(&good).unwrap();
    t.identity_files = vec![good.clone()];
    let session = connect(&t, &opts).await.unwrap();
    assert_eq!(session.exec("echo ok", None).await.unwrap().stdout, "ok\n");
    assert_eq!(sshd.accepted(), 2);
}

/// Issue 40: a rebooting node is polled quickly only while no attempt
/// could have signed anything; `connect_or_say` tells the two apart.
#[tokio::test]
async fn a_failure_says_whether_authentication_began() {
    require_sshd!();
    let fx = Fixture::new();
    let key = fx.user_key("id_ed25519", "ed25519", "");
    let stranger = keygen(&fx.path("id_stranger"), "ed25519", "");
    let sshd = fx.sshd("node", "");
    fx.trust(&sshd);
    let opts = fx.options(HostKeyChecking::Strict);
    let refused = Target {
        port: free_port(),
        ..target("w-1", &sshd, "root", &[&key])
    };
    let down = crate::ssh::connect_or_say(&refused, &opts)
        .await
        .unwrap_err();
    assert!(!down.authenticated, "{:#}", down.error);
    let wrong = target("w-1", &sshd, "root", &[&stranger]);
    let denied = crate::ssh::connect_or_say(&wrong, &opts).await.unwrap_err();
    assert!(denied.authenticated, "{:#}", denied.error);
    assert!(
        crate::ssh::connect_or_say(&target("w-1", &sshd, "root", &[&key]), &opts)
            .await
            .is_ok()
    );
}
