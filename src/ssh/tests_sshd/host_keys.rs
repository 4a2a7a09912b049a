//! Host keys against a real sshd: strict, accept-new and off, known_hosts
//! files as ssh-keygen and OpenSSH write them, aliases, hashing, and many
//! connections recording at once.

use super::*;

#[tokio::test]
async fn strict_refuses_an_unknown_host_key_before_any_command() {
    require_sshd!();
    let fx = Fixture::new();
    let key = fx.user_key("id_ed25519", "ed25519", "");
    let sshd = fx.sshd("node", "");
    let marker = fx.path("marker");
    let result = connect(
        &target("w-1", &sshd, "root", &[&key]),
        &fx.options(HostKeyChecking::Strict),
    )
    .await;
    let err = match result {
        Ok(session) => {
            let _ = session
                .exec(&format!("touch {}", marker.display()), None)
                .await;
            panic!("connected to a host with an unknown key");
        }
        Err(err) => err,
    };
    assert!(!marker.exists());
    assert_eq!(
        sshd.accepted(),
        0,
        "not even authenticated:\n{}",
        sshd.log()
    );
    let rejected = rejection(&err);
    assert!(matches!(rejected.reason, Rejection::Unknown { .. }));
    assert_eq!(
        rejected.fingerprint,
        sshd.fingerprint(),
        "the fingerprint ssh-keygen -lf shows"
    );
    let msg = format!("{err:#}");
    assert!(
        msg.starts_with(&format!(
            "w-1 (127.0.0.1:{}): the host key is not in",
            sshd.port
        )),
        "{msg}"
    );
    assert!(msg.contains(&sshd.fingerprint()), "{msg}");
    assert!(
        msg.contains(&format!(
            "ssh-keyscan -p {} -t ed25519 127.0.0.1",
            sshd.port
        )),
        "{msg}"
    );
    assert!(
        !fx.known_hosts().exists(),
        "strict never writes known_hosts"
    );
}

#[tokio::test]
async fn accept_new_records_the_key_then_refuses_a_changed_one() {
    require_sshd!();
    let fx = Fixture::new();
    let key = fx.user_key("id_ed25519", "ed25519", "");
    let mut sshd = fx.sshd("node", "");
    let opts = fx.options(HostKeyChecking::AcceptNew);
    let t = target("w-2", &sshd, "root", &[&key]);

    let session = connect(&t, &opts).await.unwrap();
    assert!(
        session.warnings()[0].contains("permanently added"),
        "{:?}",
        session.warnings()
    );
    assert_eq!(
        fx.known_hosts_text(),
        format!(
            "[127.0.0.1]:{} {}",
            sshd.port,
            public(&sshd.host_key).replace(" ed25519\n", "\n")
        )
    );
    assert_eq!(
        std::fs::metadata(fx.known_hosts())
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o600
    );
    assert_eq!(
        std::fs::metadata(fx.path("ssh"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o700
    );
    // OpenSSH reads what we wrote.
    run(Command::new("ssh-keygen")
        .arg("-F")
        .arg(format!("[127.0.0.1]:{}", sshd.port))
        .arg("-f")
        .arg(fx.known_hosts()));
    session.close().await;

    // Known now: no second line.
    let again = connect(&t, &opts).await.unwrap();
    assert!(again.warnings().is_empty());
    assert_eq!(fx.known_hosts_text().lines().count(), 1);
    drop(again);

    sshd.restart_with_new_host_key();
    let err = connect(&t, &opts).await.unwrap_err();
    assert_eq!(
        rejection(&err).reason,
        Rejection::Changed {
            at: known_hosts::Place {
                file: fx.known_hosts(),
                line: 1
            }
        }
    );
    let msg = format!("{err:#}");
    assert!(
        msg.contains("REMOTE HOST IDENTIFICATION HAS CHANGED"),
        "{msg}"
    );
    assert!(
        msg.contains(&format!("{}:1", fx.known_hosts().display())),
        "{msg}"
    );
    assert!(
        msg.contains(&format!(
            "ssh-keygen -f '{}' -R '[127.0.0.1]:{}'",
            fx.known_hosts().display(),
            sshd.port
        )),
        "{msg}"
    );
    assert_eq!(sshd.accepted(), 0);
    assert_eq!(
        fx.known_hosts_text().lines().count(),
        1,
        "a changed key is never recorded"
    );
}

#[tokio::test]
async fn hashed_known_hosts_from_ssh_keygen_is_honoured() {
    require_sshd!();
    let fx = Fixture::new();
    let key = fx.user_key("id_ed25519", "ed25519", "");
    let sshd = fx.sshd("node", "");
    fx.trust(&sshd);
    run(Command::new("ssh-keygen")
        .arg("-H")
        .arg("-f")
        .arg(fx.known_hosts()));
    assert!(
        fx.known_hosts_text().starts_with("|1|"),
        "{}",
        fx.known_hosts_text()
    );
    let session = connect(
        &target("w-3", &sshd, "root", &[&key]),
        &fx.options(HostKeyChecking::Strict),
    )
    .await
    .unwrap();
    assert_eq!(session.exec("echo ok", None).await.unwrap().stdout, "ok\n");
}

#[tokio::test]
async fn off_connects_to_a_changed_host_but_warns_loudly() {
    require_sshd!();
    let fx = Fixture::new();
    let key = fx.user_key("id_ed25519", "ed25519", "");
    let sshd = fx.sshd("node", "");
    let impostor = keygen(&fx.path("other_host_key"), "ed25519", "");
    std::fs::create_dir_all(fx.path("ssh")).unwrap();
    std::fs::write(
        fx.known_hosts(),
        format!("[127.0.0.1]:{} {}", sshd.port, public(&impostor)),
    )
    .unwrap();

    let session = connect(
        &target("w-4", &sshd, "root", &[&key]),
        &fx.options(HostKeyChecking::Off),
    )
    .await
    .unwrap();
    let warnings = session.warnings().join("\n");
    assert!(warnings.contains("host key checking is OFF"), "{warnings}");
    assert!(warnings.contains("CHANGED"), "{warnings}");
    assert!(warnings.contains(&sshd.fingerprint()), "{warnings}");
    assert_eq!(session.exec("echo ok", None).await.unwrap().stdout, "ok\n");
}

/// `[127.0.0.1]:port ssh-ed25519 AAAA…` for this sshd's host key.
fn known_line(sshd: &Sshd) -> String {
    let key = public(&sshd.host_key);
    let mut fields = key.split_whitespace();
    let (kind, blob) = (fields.next().unwrap(), fields.next().unwrap());
    format!("[127.0.0.1]:{} {kind} {blob}\n", sshd.port)
}

#[tokio::test]
async fn the_global_file_vouches_and_a_bad_line_warns_once_without_breaking_anything() {
    require_sshd!();
    let fx = Fixture::new();
    let key = fx.user_key("id_ed25519", "ed25519", "");
    let sshd = fx.sshd("node", "");
    // Only the global file knows the node; the user file starts with garbage.
    std::fs::create_dir_all(fx.path("etc")).unwrap();
    std::fs::write(fx.global_known_hosts(), known_line(&sshd)).unwrap();
    std::fs::create_dir_all(fx.path("ssh")).unwrap();
    std::fs::write(
        fx.known_hosts(),
        "# mine\n[127.0.0.1]:22 ssh-ed25519 AAAA-truncated\n",
    )
    .unwrap();
    let t = target("w-11", &sshd, "root", &[&key]);

    let opts = fx.options(HostKeyChecking::Strict);
    let session = connect(&t, &opts).await.unwrap();
    assert_eq!(session.exec("echo ok", None).await.unwrap().stdout, "ok\n");
    let warnings = session.warnings().join("\n");
    assert!(
        warnings.starts_with(&format!(
            "w-11: skipped line 2 of {}: the ssh-ed25519 key cannot be decoded",
            fx.known_hosts().display()
        )),
        "{warnings}"
    );
    assert_eq!(session.warnings().len(), 1, "{warnings}");
    // Once per run, not once per node.
    let again = connect(&t, &opts).await.unwrap();
    assert!(again.warnings().is_empty(), "{:?}", again.warnings());

    // accept-new has nothing to record: the global file knows the key, and is never written.
    let global_before = std::fs::read_to_string(fx.global_known_hosts()).unwrap();
    let user_before = fx.known_hosts_text();
    let session = connect(&t, &fx.options(HostKeyChecking::AcceptNew))
        .await
        .unwrap();
    assert!(
        session
            .warnings()
            .iter()
            .all(|w| !w.contains("permanently added")),
        "{:?}",
        session.warnings()
    );
    assert_eq!(fx.known_hosts_text(), user_before);
    assert_eq!(
        std::fs::read_to_string(fx.global_known_hosts()).unwrap(),
        global_before
    );

    // Not known anywhere: the refusal lists both files and the skipped line.
    std::fs::write(fx.global_known_hosts(), "").unwrap();
    let err = connect(&t, &fx.options(HostKeyChecking::Strict))
        .await
        .unwrap_err();
    let msg = format!("{err:#}");
    assert!(
        msg.contains(&format!(
            "not in {} or {}",
            fx.known_hosts().display(),
            fx.global_known_hosts().display()
        )),
        "{msg}"
    );
    assert!(
        msg.contains(&format!(
            "Note: {}:2 could not be read",
            fx.known_hosts().display()
        )),
        "{msg}"
    );
}

#[tokio::test]
async fn accept_new_never_records_a_second_key_type_for_a_known_host() {
    require_sshd!();
    let fx = Fixture::new();
    let key = fx.user_key("id_ed25519", "ed25519", "");
    let sshd = fx.sshd("node", "");
    // The node was recorded by its ECDSA key; now it offers only Ed25519.
    let ecdsa = keygen(&fx.path("old_ecdsa_host_key"), "ecdsa", "");
    let ecdsa_pub = public(&ecdsa);
    let mut fields = ecdsa_pub.split_whitespace();
    let recorded = format!(
        "[127.0.0.1]:{} {} {}\n",
        sshd.port,
        fields.next().unwrap(),
        fields.next().unwrap()
    );
    std::fs::create_dir_all(fx.path("ssh")).unwrap();
    std::fs::write(fx.known_hosts(), &recorded).unwrap();
    let t = target("w-12", &sshd, "root", &[&key]);

    let err = connect(&t, &fx.options(HostKeyChecking::AcceptNew))
        .await
        .unwrap_err();
    let rejected = rejection(&err);
    assert!(
        matches!(&rejected.reason, Rejection::OtherType { recorded } if recorded.len() == 1),
        "{err:#}"
    );
    let msg = format!("{err:#}");
    assert!(
        msg.contains("recorded with another key type only (ECDSA at"),
        "{msg}"
    );
    assert!(msg.contains("does not add a second key type"), "{msg}");
    assert_eq!(fx.known_hosts_text(), recorded, "nothing was appended");
    assert_eq!(sshd.accepted(), 0);
}

#[tokio::test]
async fn hash_known_hosts_records_a_hashed_name_that_ssh_and_the_next_connection_find() {
    require_sshd!();
    let fx = Fixture::new();
    let key = fx.user_key("id_ed25519", "ed25519", "");
    let sshd = fx.sshd("node", "");
    let mut t = target("w-13", &sshd, "root", &[&key]);
    t.host_keys.hash = true;

    let session = connect(&t, &fx.options(HostKeyChecking::AcceptNew))
        .await
        .unwrap();
    assert!(session.warnings()[0].contains("permanently added"));
    let text = fx.known_hosts_text();
    assert!(text.starts_with("|1|"), "{text}");
    assert!(!text.contains("127.0.0.1"), "the name is hashed: {text}");
    assert_eq!(text.lines().count(), 1);
    // OpenSSH finds it by name...
    run(Command::new("ssh-keygen")
        .arg("-F")
        .arg(format!("[127.0.0.1]:{}", sshd.port))
        .arg("-f")
        .arg(fx.known_hosts()));
    // ...and so do we, strictly, on the next connection.
    let again = connect(&t, &fx.options(HostKeyChecking::Strict))
        .await
        .unwrap();
    assert!(again.warnings().is_empty(), "{:?}", again.warnings());
    assert_eq!(fx.known_hosts_text(), text);
}

#[tokio::test]
async fn host_key_alias_is_the_name_looked_up_and_recorded() {
    require_sshd!();
    let fx = Fixture::new();
    let key = fx.user_key("id_ed25519", "ed25519", "");
    let sshd = fx.sshd("node", "");
    let mut t = target("cp-1", &sshd, "root", &[&key]);
    t.host_keys.alias = Some("cp-1.fleet".into());

    let err = connect(&t, &fx.options(HostKeyChecking::Strict))
        .await
        .unwrap_err();
    let msg = format!("{err:#}");
    assert!(
        msg.contains(&format!(
            "ssh-keyscan -p {} -t ed25519 127.0.0.1 | sed 's/^[^ ]*/cp-1.fleet/' >> '{}'",
            sshd.port,
            fx.known_hosts().display()
        )),
        "{msg}"
    );

    connect(&t, &fx.options(HostKeyChecking::AcceptNew))
        .await
        .unwrap();
    let text = fx.known_hosts_text();
    assert!(text.starts_with("cp-1.fleet ssh-ed25519 "), "{text}");
    connect(&t, &fx.options(HostKeyChecking::Strict))
        .await
        .unwrap();
    // Without the alias the same node is a stranger.
    t.host_keys.alias = None;
    let err = connect(&t, &fx.options(HostKeyChecking::Strict))
        .await
        .unwrap_err();
    assert!(matches!(rejection(&err).reason, Rejection::Unknown { .. }));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_accept_new_records_each_host_exactly_once() {
    require_sshd!();
    let fx = Fixture::new();
    let key = fx.user_key("id_ed25519", "ed25519", "");
    let a = fx.sshd("a", "");
    let b = fx.sshd("b", "");
    let opts = fx.options(HostKeyChecking::AcceptNew);
    let targets: Vec<Target> = (0..6)
        .map(|i| {
            target(
                &format!("w-{i}"),
                if i % 2 == 0 { &a } else { &b },
                "root",
                &[&key],
            )
        })
        .collect();
    let results = connect_all(&targets, &opts, 6).await;
    for (node, result) in &results {
        assert!(result.is_ok(), "{node}: {:#}", result.as_ref().unwrap_err());
    }
    let text = fx.known_hosts_text();
    assert_eq!(text.lines().count(), 2, "{text}");
    assert_eq!(
        text.matches(&format!("[127.0.0.1]:{} ", a.port)).count(),
        1,
        "{text}"
    );
    assert_eq!(
        text.matches(&format!("[127.0.0.1]:{} ", b.port)).count(),
        1,
        "{text}"
    );
    let added = results
        .iter()
        .flat_map(|(_, r)| r.as_ref().unwrap().warnings())
        .filter(|w| w.contains("permanently added"))
        .count();
    assert_eq!(added, 2, "one 'permanently added' per host");
}

#[tokio::test]
async fn user_known_hosts_file_none_accepts_new_keys_without_recording_them() {
    require_sshd!();
    let fx = Fixture::new();
    let key = fx.user_key("id_ed25519", "ed25519", "");
    let sshd = fx.sshd("node", "");
    let mut t = target("w-16", &sshd, "root", &[&key]);
    t.host_keys.user_files = Some(vec![]);

    let session = connect(&t, &fx.options(HostKeyChecking::AcceptNew))
        .await
        .unwrap();
    let warnings = session.warnings().join("\n");
    assert!(warnings.contains("without recording it"), "{warnings}");
    assert!(
        warnings.contains("UserKnownHostsFile is none"),
        "{warnings}"
    );
    assert!(!fx.known_hosts().exists());

    let err = connect(&t, &fx.options(HostKeyChecking::Strict))
        .await
        .unwrap_err();
    let msg = format!("{err:#}");
    assert!(msg.contains("there is no file to add it to"), "{msg}");
}
