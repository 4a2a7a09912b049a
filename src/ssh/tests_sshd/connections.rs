//! A connection's life against a real sshd: one connection per node, jump
//! hosts and ProxyCommand, dropped and silent peers, timeouts, MaxStartups,
//! and output too large to keep.

use super::*;

#[tokio::test]
async fn exec_returns_output_and_every_command_reuses_one_connection() {
    require_sshd!();
    let fx = Fixture::new();
    let key = fx.user_key("id_ed25519", "ed25519", "");
    let sshd = fx.sshd("node", "");
    fx.trust(&sshd);
    let session = connect(
        &target("cp-1", &sshd, "root", &[&key]),
        &fx.options(HostKeyChecking::Strict),
    )
    .await
    .unwrap();
    assert_eq!(session.node(), "cp-1");
    assert!(session.is_root());

    let out = session
        .exec("echo out; echo err >&2; exit 3", None)
        .await
        .unwrap();
    assert_eq!(
        out,
        Output {
            exit: Some(3),
            signal: None,
            stdout: "out\n".into(),
            stderr: "err\n".into()
        }
    );
    let out = session
        .exec("tr a-z A-Z", Some(b"piped input"))
        .await
        .unwrap();
    assert_eq!((out.exit, out.stdout.as_str()), (Some(0), "PIPED INPUT"));
    // No stdin given: EOF is sent, so `cat` ends instead of hanging.
    assert_eq!(session.exec("cat", None).await.unwrap().exit, Some(0));
    let out = session.exec_root("id -u", None).await.unwrap();
    assert_eq!(out.stdout.trim(), "0", "root runs without sudo");
    let out = session.exec("printf '\\377ok'", None).await.unwrap();
    assert_eq!(
        out.stdout, "\u{fffd}ok",
        "invalid UTF-8 is replaced, not an error"
    );

    for i in 0..10 {
        let out = session.exec(&format!("echo {i}"), None).await.unwrap();
        assert_eq!(out.stdout, format!("{i}\n"));
    }
    // Concurrent commands share the connection too, a channel each.
    let (a, b) = tokio::join!(session.exec("echo a", None), session.exec("echo b", None));
    assert_eq!(
        (a.unwrap().stdout, b.unwrap().stdout),
        ("a\n".to_string(), "b\n".to_string())
    );
    assert_eq!(
        sshd.accepted(),
        1,
        "one login for all commands:\n{}",
        sshd.log()
    );
    assert!(session.warnings().is_empty(), "{:?}", session.warnings());
    session.close().await;
}

#[tokio::test]
async fn a_killed_server_mid_command_is_a_disconnect_naming_the_node() {
    require_sshd!();
    let fx = Fixture::new();
    let key = fx.user_key("id_ed25519", "ed25519", "");
    let mut sshd = fx.sshd("node", "");
    fx.trust(&sshd);
    let session = connect(
        &target("w-7", &sshd, "root", &[&key]),
        &fx.options(HostKeyChecking::Strict),
    )
    .await
    .unwrap();
    let started = fx.path("started");
    let command = format!("touch {}; sleep 60", started.display());
    let killer = async {
        while !started.exists() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        sshd.kill();
    };
    // The command timeout (20 s) is the backstop; a hang would show up as CommandTimedOut.
    let (result, ()) = tokio::join!(session.exec(&command, None), killer);
    let err = result.unwrap_err();
    assert!(is_disconnected(&err), "{err:#}");
    assert!(err.chain().all(|e| !e.is::<CommandTimedOut>()), "{err:#}");
    let msg = format!("{err:#}");
    assert!(msg.starts_with("w-7: running `touch"), "{msg}");
    assert!(msg.contains("w-7: the SSH connection dropped"), "{msg}");
    // And the session stays dead, failing fast.
    let err = session.exec("true", None).await.unwrap_err();
    assert!(is_disconnected(&err), "{err:#}");
}

#[tokio::test]
async fn a_silent_peer_is_detected_by_keepalive_not_left_hanging() {
    require_sshd!();
    let fx = Fixture::new();
    let key = fx.user_key("id_ed25519", "ed25519", "");
    let sshd = fx.sshd("node", "");
    fx.trust(&sshd);
    let opts = Options {
        keepalive_interval: Duration::from_millis(300),
        keepalive_max: 2,
        ..fx.options(HostKeyChecking::Strict)
    };
    let session = connect(&target("w-10", &sshd, "root", &[&key]), &opts)
        .await
        .unwrap();
    let started = fx.path("started");
    let command = format!("touch {}; sleep 60", started.display());
    let freezer = async {
        while !started.exists() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        sshd.freeze_sessions();
    };
    let (result, ()) = tokio::join!(session.exec(&command, None), freezer);
    let err = result.unwrap_err();
    assert!(
        is_disconnected(&err),
        "keepalive should have dropped the connection: {err:#}"
    );
    assert!(
        format!("{err:#}").contains("w-10: the SSH connection dropped"),
        "{err:#}"
    );
}

#[tokio::test]
async fn command_timeout_names_node_and_command_and_the_session_survives() {
    require_sshd!();
    let fx = Fixture::new();
    let key = fx.user_key("id_ed25519", "ed25519", "");
    let sshd = fx.sshd("node", "");
    fx.trust(&sshd);
    let session = connect(
        &target("w-8", &sshd, "root", &[&key]),
        &fx.options(HostKeyChecking::Strict),
    )
    .await
    .unwrap();
    let err = session
        .exec_timeout("sleep 5\necho never", None, Duration::from_millis(300))
        .await
        .unwrap_err();
    let timed_out = err
        .downcast_ref::<CommandTimedOut>()
        .expect("CommandTimedOut");
    assert_eq!(
        (timed_out.node.as_str(), timed_out.command.as_str()),
        ("w-8", "sleep 5 …")
    );
    assert!(
        err.to_string()
            .starts_with("w-8: `sleep 5 …` did not finish within 300ms"),
        "{err}"
    );
    assert!(!is_disconnected(&err));
    assert_eq!(
        session.exec("echo still here", None).await.unwrap().stdout,
        "still here\n"
    );
}

#[tokio::test]
async fn jump_host_tunnels_to_the_node_and_both_host_keys_are_checked() {
    require_sshd!();
    let fx = Fixture::new();
    let key = fx.user_key("id_ed25519", "ed25519", "");
    let bastion = fx.sshd("bastion", "AllowTcpForwarding yes\nLogLevel DEBUG1");
    let node = fx.sshd("node", "AllowTcpForwarding no");
    let mut t = target("cp-1", &node, "root", &[&key]);
    let mut jump = target("jump host 127.0.0.1", &bastion, "root", &[&key]);
    t.jump = Some(Box::new(jump.clone()));

    // Strict with nothing known: the bastion is refused first, by name.
    let err = connect(&t, &fx.options(HostKeyChecking::Strict))
        .await
        .unwrap_err();
    let msg = format!("{err:#}");
    assert!(
        msg.starts_with("cp-1: cannot reach it through jump host 127.0.0.1"),
        "{msg}"
    );
    assert_eq!(rejection(&err).port, bastion.port);

    let session = connect(&t, &fx.options(HostKeyChecking::AcceptNew))
        .await
        .unwrap();
    assert_eq!(
        session.exec("echo via bastion", None).await.unwrap().stdout,
        "via bastion\n"
    );
    let known = fx.known_hosts_text();
    assert!(
        known.contains(&format!("[127.0.0.1]:{} ", bastion.port)),
        "{known}"
    );
    assert!(
        known.contains(&format!("[127.0.0.1]:{} ", node.port)),
        "{known}"
    );
    assert_eq!((bastion.accepted(), node.accepted()), (1, 1));
    assert!(
        bastion
            .log()
            .contains(&format!("port 0, target 127.0.0.1 port {}", node.port)),
        "the node was reached through the bastion's direct-tcpip:\n{}",
        bastion.log()
    );

    // A bastion that does not forward says so.
    jump.port = node.port;
    t.jump = Some(Box::new(jump));
    let err = connect(&t, &fx.options(HostKeyChecking::AcceptNew))
        .await
        .unwrap_err();
    let msg = format!("{err:#}");
    assert!(msg.contains("refused to forward"), "{msg}");
    assert!(msg.contains("AllowTcpForwarding"), "{msg}");
}

#[tokio::test]
async fn connect_all_keeps_order_and_names_each_failure() {
    require_sshd!();
    let fx = Fixture::new();
    let key = fx.user_key("id_ed25519", "ed25519", "");
    let sshd = fx.sshd("node", "");
    fx.trust(&sshd);
    let mut dead = target("w-dead", &sshd, "root", &[&key]);
    dead.port = free_port();
    let targets = vec![
        target("w-a", &sshd, "root", &[&key]),
        dead,
        target("w-b", &sshd, "root", &[&key]),
    ];
    let results = connect_all(&targets, &fx.options(HostKeyChecking::Strict), 2).await;
    let names: Vec<&str> = results.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["w-a", "w-dead", "w-b"]);
    assert!(results[0].1.is_ok() && results[2].1.is_ok());
    let err = results[1].1.as_ref().unwrap_err();
    assert!(
        format!("{err:#}").starts_with("w-dead: cannot connect to 127.0.0.1:"),
        "{err:#}"
    );
    assert_eq!(sshd.accepted(), 2);
}

#[tokio::test]
async fn proxy_command_from_ssh_config_carries_the_connection() {
    require_sshd!();
    if Command::new("bash").arg("-c").arg("true").status().is_err() {
        eprintln!("skipping ProxyCommand test: bash is missing");
        return;
    }
    let fx = Fixture::new();
    let key = fx.user_key("id_ed25519", "ed25519", "");
    let sshd = fx.sshd("node", "");
    fx.trust(&sshd);
    let seen = fx.path("proxy-saw");
    // bash's /dev/tcp is the proxy: no nc or socat needed. It records the
    // tokens it was given, so the expansion is proven too.
    let config = format!(
        "Host proxied\n  HostName 127.0.0.1\n  Port {port}\n  User root\n  IdentityFile {key}\n  \
         ProxyCommand bash -c 'echo %r@%h:%p %n > {seen}; exec 3<>/dev/tcp/%h/%p; cat <&3 & exec cat >&3'\n",
        port = sshd.port,
        key = key.display(),
        seen = seen.display()
    );
    let inv = config::tests::inventory(vec![config::tests::node("w-14", "proxied")]);
    let env = config::LocalEnv {
        user: Some("op".into()),
        home: Some(fx.dir.path().to_path_buf()),
        default_identities: vec![],
    };
    let parsed = config::ConfigText::new(config.to_string(), fx.dir.path()).unwrap();
    let t = config::resolve_with(&inv, &inv.nodes[0], Some(&parsed), &env).unwrap();
    assert!(t.proxy_command.is_some(), "{t:?}");

    let session = connect(&t, &fx.options(HostKeyChecking::Strict))
        .await
        .unwrap();
    assert_eq!(
        session.exec("echo proxied", None).await.unwrap().stdout,
        "proxied\n"
    );
    assert_eq!(
        std::fs::read_to_string(&seen).unwrap(),
        format!("root@127.0.0.1:{} proxied\n", sshd.port)
    );
    // The server saw a client on loopback, as it would from nc.
    assert_eq!(sshd.accepted(), 1);
    session.close().await;
}

/// An sshd with `MaxStartups 1:100:1` and one connection held open without
/// a word: every further connection is turned away before the banner, as a
/// busy bastion turns away the connections over its MaxStartups.
fn crowded_sshd(fx: &Fixture) -> (Sshd, std::net::TcpStream) {
    let sshd = fx.sshd("crowded", "MaxStartups 1:100:1\nLogLevel VERBOSE");
    fx.trust(&sshd);
    // sshd's own banner says it let the connection in; until the probe
    // that saw sshd listen is gone, it turns this one away too.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let hold = std::net::TcpStream::connect(("127.0.0.1", sshd.port)).unwrap();
        let mut banner = [0u8; 4];
        std::io::Read::read_exact(&mut &hold, &mut banner).unwrap();
        if &banner == b"SSH-" {
            return (sshd, hold);
        }
        assert!(Instant::now() < deadline, "{}", sshd.log());
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test]
async fn a_connection_sshd_keeps_turning_away_fails_saying_so() {
    require_sshd!();
    let fx = Fixture::new();
    let key = fx.user_key("id_ed25519", "ed25519", "");
    let (sshd, _hold) = crowded_sshd(&fx);
    let before = sshd.log().matches("past MaxStartups").count();
    let err = connect(
        &target("w-1", &sshd, "root", &[&key]),
        &fx.options(HostKeyChecking::Strict),
    )
    .await
    .unwrap_err();
    let msg = format!("{err:#}");
    assert!(
        msg.starts_with(&format!(
            "w-1: 127.0.0.1:{} closed the connection before its SSH banner {} times in a row",
            sshd.port,
            handshake::ATTEMPTS
        )),
        "{msg}"
    );
    assert!(msg.contains("MaxStartups"), "{msg}");
    assert_eq!(
        sshd.log().matches("past MaxStartups").count() - before,
        handshake::ATTEMPTS as usize,
        "{}",
        sshd.log()
    );
}

#[tokio::test]
async fn a_connection_sshd_turned_away_is_tried_again_and_succeeds() {
    require_sshd!();
    let fx = Fixture::new();
    let key = fx.user_key("id_ed25519", "ed25519", "");
    let (sshd, hold) = crowded_sshd(&fx);
    let drops = || sshd.log().matches("past MaxStartups").count();
    let before = drops();
    let t = target("w-1", &sshd, "root", &[&key]);
    let opts = fx.options(HostKeyChecking::Strict);
    let connecting = tokio::spawn(async move { connect(&t, &opts).await });
    // Once sshd has turned the first attempt away, make room: a later
    // attempt gets in.
    let deadline = Instant::now() + Duration::from_secs(30);
    while drops() == before {
        assert!(Instant::now() < deadline, "never dropped: {}", sshd.log());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    drop(hold);
    let session = connecting.await.unwrap().unwrap();
    assert_eq!(session.exec("echo in", None).await.unwrap().stdout, "in\n");
    let retried = session.retried().join("\n");
    assert!(
        retried.starts_with("w-1: connected on attempt "),
        "{retried}"
    );
    assert!(
        retried.contains("sshd closed the earlier ones before its banner"),
        "{retried}"
    );
    assert_eq!(sshd.accepted(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_nodes_behind_one_bastion_all_get_through_its_max_startups() {
    require_sshd!();
    let fx = Fixture::new();
    let key = fx.user_key("id_ed25519", "ed25519", "");
    // OpenSSH's default MaxStartups 10:30:100 on both.
    let bastion = fx.sshd("bastion", "AllowTcpForwarding yes");
    let node = fx.sshd("node", "");
    let known = format!(
        "[127.0.0.1]:{} {}[127.0.0.1]:{} {}",
        bastion.port,
        public(&bastion.host_key),
        node.port,
        public(&node.host_key)
    );
    std::fs::create_dir_all(fx.path("ssh")).unwrap();
    std::fs::write(fx.known_hosts(), known).unwrap();
    let jump = target("jump host 127.0.0.1", &bastion, "root", &[&key]);
    // Forty "nodes" (one sshd, which MaxStartups also guards) all at once,
    // each over its own connection to the bastion.
    let targets: Vec<Target> = (0..40)
        .map(|i| Target {
            jump: Some(Box::new(jump.clone())),
            ..target(&format!("w-{i}"), &node, "root", &[&key])
        })
        .collect();
    let results = connect_all(&targets, &fx.options(HostKeyChecking::Strict), 40).await;
    for (name, result) in &results {
        let session = result.as_ref().unwrap_or_else(|e| panic!("{name}: {e:#}"));
        // Paced, not merely retried: a slot is handed on only once sshd
        // has stopped counting the connection that held it.
        assert!(session.retried().is_empty(), "{:?}", session.retried());
    }
    assert_eq!((bastion.accepted(), node.accepted()), (40, 40));
}

#[tokio::test]
async fn endless_output_is_kept_to_its_head_and_tail_and_a_copy_to_what_was_announced() {
    require_sshd!();
    let fx = Fixture::new();
    let key = fx.user_key("id_ed25519", "ed25519", "");
    let sshd = fx.sshd("node", "");
    fx.trust(&sshd);
    let opts = Options {
        max_output: 64 << 10,
        ..fx.options(HostKeyChecking::Strict)
    };
    let session = connect(&target("w-9", &sshd, "root", &[&key]), &opts)
        .await
        .unwrap();
    // 16 MiB on each stream: 256 times what is kept.
    let out = session
        .exec(
            "yes | head -c 16777216; yes err | head -c 16777216 >&2; echo last line",
            None,
        )
        .await
        .unwrap();
    assert_eq!(out.exit, Some(0));
    let marker = |stream: &str, kept: usize| {
        format!(
            "\n[fleetctl: {} bytes of {stream} cut here: the node printed more than fleetctl keeps]\n",
            16_777_216 + if stream == "stdout" { 10 } else { 0 } - kept
        )
    };
    assert!(out.stdout.len() < (64 << 10) + 200, "{}", out.stdout.len());
    assert!(out.stdout.starts_with("y\ny\n"));
    assert!(out.stdout.ends_with("y\ny\nlast line\n"));
    assert!(
        out.stdout.contains(&marker("stdout", 64 << 10)),
        "{}",
        &out.stdout[48 << 10..(48 << 10) + 200]
    );
    assert!(out.stderr.len() < (64 << 10) + 200);
    assert!(out.stderr.contains(&marker("stderr", 64 << 10)));

    // A stream that never ends: memory stays bounded until the timeout ends it.
    let err = session
        .exec_timeout("yes", None, Duration::from_secs(2))
        .await
        .unwrap_err();
    assert!(err.downcast_ref::<CommandTimedOut>().is_some(), "{err:#}");

    // A copy stops past the size announced, whatever the node keeps sending.
    let mut sink = Vec::new();
    let err = session
        .exec_root_into("yes", &mut sink, 100_000, Duration::from_secs(20))
        .await
        .unwrap_err();
    assert!(
        format!("{err:#}").contains(
            "w-9: running `yes`: it sent more than the 100000 bytes expected; fleetctl stopped"
        ),
        "{err:#}"
    );
    assert!(sink.len() <= 100_000, "{}", sink.len());
    let mut sink = Vec::new();
    let out = session
        .exec_root_into(
            "head -c 100000 /dev/zero",
            &mut sink,
            100_000,
            Duration::from_secs(20),
        )
        .await
        .unwrap();
    assert_eq!((out.exit, sink.len()), (Some(0), 100_000));
    assert_eq!(
        session.exec("echo still here", None).await.unwrap().stdout,
        "still here\n"
    );
}
