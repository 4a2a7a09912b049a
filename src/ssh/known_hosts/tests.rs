use super::*;

const K1: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIH17g4gplXVYCJTLdFmqD7FeGWQWH+bMbI2RvzP5AaMf";
const K2: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHTPXsMHSDYh0ZlIFM539UfUrpWKvi1lXo87ynluRZUY";
const K3: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIIWn/RSrDBta5RVQf8dlu0f319uwcbveFGUXnzkK49bY";
const K4_ECDSA: &str = "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBNXM/nAheHcI+jCbQ0MZrd8sStCBIpCAlbbYL1x4CMTJLlh0S3RhFgIBcayMrk90LkAWF97B9kYXu+4KyY9Iecw=";
/// `ssh-keygen -H` of "node1.example.com K1" and "[10.0.0.7]:2222 K2".
const HASHED: &str = "\
|1|XZIQRgOlwHbXZgCSgG82D9kVQag=|MrqF0jYz5K2cpNwzLsTw9yR3jwY= ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIH17g4gplXVYCJTLdFmqD7FeGWQWH+bMbI2RvzP5AaMf
|1|FoUGnemcQgvHL9CfqNPArfgWe4I=|CxO0CjsZwrWkt5E/EVmVtBeXViY= ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHTPXsMHSDYh0ZlIFM539UfUrpWKvi1lXo87ynluRZUY
";

fn key(s: &str) -> PublicKey {
    PublicKey::from_openssh(s).unwrap()
}

/// The status of `key` for `host:port` in one file named "kh".
fn st(text: &str, host: &str, port: u16, key: &PublicKey) -> HostKeyStatus {
    check(
        &[HostsFile::new("kh", text)],
        &host_key_name(host, port),
        key,
    )
}

fn at(line: usize) -> Place {
    Place {
        file: "kh".into(),
        line,
    }
}

fn unknown() -> HostKeyStatus {
    HostKeyStatus::Unknown {
        other_types: vec![],
        cert_authorities: vec![],
    }
}

#[test]
fn plain_host_on_port_22() {
    let text = format!("other.example {K2}\nnode1 {K1}\n");
    assert_eq!(
        st(&text, "node1", 22, &key(K1)),
        HostKeyStatus::Known { at: at(2) }
    );
    assert_eq!(st(&text, "node2", 22, &key(K1)), unknown());
}

#[test]
fn non_default_port_needs_the_bracketed_name() {
    let text = format!("node1 {K1}\n[node1]:2222 {K2}\n");
    assert_eq!(
        st(&text, "node1", 2222, &key(K2)),
        HostKeyStatus::Known { at: at(2) }
    );
    // The port-22 entry does not vouch for port 2222, and vice versa.
    assert_eq!(
        st(&text, "node1", 2222, &key(K1)),
        HostKeyStatus::Changed { at: at(2) }
    );
    assert_eq!(
        st(&text, "node1", 22, &key(K2)),
        HostKeyStatus::Changed { at: at(1) }
    );
    assert_eq!(st(&text, "node1", 2200, &key(K1)), unknown());
}

#[test]
fn several_hosts_per_line() {
    let text = format!("node1,10.0.0.5,[10.0.0.5]:2222 {K1}\n");
    for (host, port) in [("node1", 22), ("10.0.0.5", 22), ("10.0.0.5", 2222)] {
        assert_eq!(
            st(&text, host, port, &key(K1)),
            HostKeyStatus::Known { at: at(1) },
            "{host}:{port}"
        );
    }
    assert_eq!(st(&text, "10.0.0.50", 22, &key(K1)), unknown());
}

#[test]
fn hashed_entries_match_their_host_only() {
    assert_eq!(
        st(HASHED, "node1.example.com", 22, &key(K1)),
        HostKeyStatus::Known { at: at(1) }
    );
    assert_eq!(
        st(HASHED, "10.0.0.7", 2222, &key(K2)),
        HostKeyStatus::Known { at: at(2) }
    );
    assert_eq!(
        st(HASHED, "node1.example.com", 22, &key(K3)),
        HostKeyStatus::Changed { at: at(1) }
    );
    assert_eq!(st(HASHED, "10.0.0.7", 22, &key(K2)), unknown());
    assert_eq!(st(HASHED, "node2.example.com", 22, &key(K1)), unknown());
}

#[test]
fn changed_key_names_the_first_offending_line() {
    let text = format!("# fleet\n\nnode0 {K3}\nnode1 {K2}\nnode1 {K3}\n");
    assert_eq!(
        st(&text, "node1", 22, &key(K1)),
        HostKeyStatus::Changed { at: at(4) }
    );
}

#[test]
fn any_matching_line_wins_over_a_stale_one() {
    // russh's helper reports "changed" here; OpenSSH (and we) accept.
    let text = format!("node1 {K2}\nnode1 {K1}\n");
    assert_eq!(
        st(&text, "node1", 22, &key(K1)),
        HostKeyStatus::Known { at: at(2) }
    );
}

#[test]
fn a_key_of_another_type_is_not_a_change() {
    let text = format!("node1 {K4_ECDSA}\n");
    assert_eq!(
        st(&text, "node1", 22, &key(K1)),
        HostKeyStatus::Unknown {
            other_types: vec![(at(1), key(K4_ECDSA).algorithm())],
            cert_authorities: vec![],
        }
    );
    assert_eq!(
        recorded_algorithms(&[HostsFile::new("kh", text.as_str())], "node1"),
        vec![key(K4_ECDSA).algorithm()]
    );
}

#[test]
fn wildcards_and_negation() {
    let text = format!("*.example.com,!bad.example.com {K1}\nnode? {K2}\n");
    assert_eq!(
        st(&text, "n1.example.com", 22, &key(K1)),
        HostKeyStatus::Known { at: at(1) }
    );
    assert_eq!(st(&text, "bad.example.com", 22, &key(K1)), unknown());
    assert_eq!(
        st(&text, "node7", 22, &key(K2)),
        HostKeyStatus::Known { at: at(2) }
    );
    assert_eq!(st(&text, "node17", 22, &key(K2)), unknown());
}

#[test]
fn host_names_are_case_insensitive() {
    let text = format!("Node1.Example.COM {K1}\n");
    assert_eq!(
        st(&text, "NODE1.example.com", 22, &key(K1)),
        HostKeyStatus::Known { at: at(1) }
    );
}

#[test]
fn revoked_key_is_refused_even_if_also_listed() {
    let text = format!("node1 {K1}\n@revoked * {K1}\n");
    assert_eq!(
        st(&text, "node1", 22, &key(K1)),
        HostKeyStatus::Revoked { at: at(2) }
    );
    // A revoked key does not affect other keys.
    let text = format!("node1 {K2}\n@revoked * {K1}\n");
    assert_eq!(
        st(&text, "node1", 22, &key(K2)),
        HostKeyStatus::Known { at: at(1) }
    );
}

#[test]
fn cert_authority_lines_are_reported_not_trusted() {
    let text = format!("@cert-authority *.example.com {K1}\n");
    assert_eq!(
        st(&text, "n1.example.com", 22, &key(K1)),
        HostKeyStatus::Unknown {
            other_types: vec![],
            cert_authorities: vec![at(1)],
        }
    );
}

#[test]
fn garbage_and_unknown_markers_are_skipped_with_line_numbers_intact() {
    let text = format!("node1\nnode1 ssh-ed25519 !!!notbase64\n@future node1 {K2}\nnode1 {K1}\n");
    assert_eq!(
        st(&text, "node1", 22, &key(K1)),
        HostKeyStatus::Known { at: at(4) }
    );
}

#[test]
fn recorded_line_is_found_again() {
    let line = entry_line(&host_key_name("10.0.0.9", 2222), &key(K3), None).unwrap();
    assert_eq!(line, format!("[10.0.0.9]:2222 {K3}\n"));
    assert_eq!(
        st(&line, "10.0.0.9", 2222, &key(K3)),
        HostKeyStatus::Known { at: at(1) }
    );
}

#[test]
fn record_creates_private_dir_and_file_and_appends() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("ssh").join("known_hosts");
    assert_eq!(record(&path, "node1", &key(K1), false).unwrap(), None);
    // A file without a final newline gets one before the new entry.
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str("# no newline");
    std::fs::write(&path, &text).unwrap();
    assert_eq!(
        record(&path, "[node2]:2200", &key(K2), false).unwrap(),
        None
    );

    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(
        text,
        format!("node1 {K1}\n# no newline\n[node2]:2200 {K2}\n")
    );
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&path), 0o600);
    assert_eq!(mode(path.parent().unwrap()), 0o700);
}

proptest::proptest! {
    #[test]
    fn a_recorded_entry_vouches_for_exactly_its_host_and_port(
        host in "[a-z0-9][a-z0-9.-]{0,20}",
        port in 1u16..,
        other_port in 1u16..,
    ) {
        let line = entry_line(&host_key_name(&host, port), &key(K1), None).unwrap();
        proptest::prop_assert_eq!(st(&line, &host, port, &key(K1)), HostKeyStatus::Known { at: at(1) });
        proptest::prop_assert_eq!(st(&line, &host, port, &key(K2)), HostKeyStatus::Changed { at: at(1) });
        if other_port != port {
            proptest::prop_assert_eq!(st(&line, &host, other_port, &key(K1)), unknown());
        }
        let other_host = format!("x{host}");
        proptest::prop_assert_eq!(st(&line, &other_host, port, &key(K1)), unknown());
    }

    #[test]
    fn glob_without_wildcards_is_equality(a in "[a-z.:\\[\\]]{0,8}", b in "[a-z.:\\[\\]]{0,8}") {
        proptest::prop_assert_eq!(glob(&a, &b), a == b);
        proptest::prop_assert!(glob("*", &b));
        let prefix: String = b.chars().take(3).collect();
        let pattern = format!("{prefix}*");
        proptest::prop_assert!(glob(&pattern, &b));
    }
}

#[test]
fn glob_rules() {
    assert!(glob("*", "anything"));
    assert!(glob("a*c", "abbbc"));
    assert!(glob("a*b*c", "axxbyyc"));
    assert!(!glob("a*b*c", "axxbyy"));
    assert!(glob("[10.0.0.?]:22", "[10.0.0.1]:22"));
    assert!(!glob("node", "node1"));
}

#[test]
fn labels_and_fingerprints() {
    let k = key(K1);
    assert_eq!(type_label(&k.algorithm()), "ED25519");
    assert_eq!(keyscan_type(&key(K4_ECDSA).algorithm()), "ecdsa");
    // As printed by `ssh-keygen -lf`.
    assert_eq!(
        fingerprint(&k),
        "SHA256:7cPFwqkjErlEFBfu9gLfrgWOkmqveMcvc5QvUGABmNM"
    );
}

#[test]
fn user_and_global_files_are_one_list_and_places_name_the_file() {
    let user = HostsFile::new("/home/op/.ssh/known_hosts", format!("other {K2}\n"));
    let global = HostsFile::new("/etc/ssh/ssh_known_hosts", format!("# fleet\nnode1 {K1}\n"));
    let files = [user, global];
    assert_eq!(
        check(&files, "node1", &key(K1)),
        HostKeyStatus::Known {
            at: Place {
                file: "/etc/ssh/ssh_known_hosts".into(),
                line: 2
            }
        }
    );
    // A changed key in the global file is a change all the same.
    assert_eq!(
        check(&files, "node1", &key(K3)),
        HostKeyStatus::Changed {
            at: Place {
                file: "/etc/ssh/ssh_known_hosts".into(),
                line: 2
            }
        }
    );
    // And a match in any file wins over a stale line in another.
    let stale_user = HostsFile::new("u", format!("node1 {K3}\n"));
    assert!(matches!(
        check(&[stale_user, files[1].clone()], "node1", &key(K1)),
        HostKeyStatus::Known { .. }
    ));
    assert_eq!(
        recorded_algorithms(&files, "node1"),
        vec![key(K1).algorithm()]
    );
}

#[test]
fn unreadable_lines_are_reported_with_their_line_and_skipped() {
    let text = format!(
        "# comment\n\nnode1\nnode2 ssh-ed25519 !!!notbase64\n@future node1 {K2}\n\
             |1|!!|!! {K1}\nnode3 ssh-ed25519\nnode1 {K1}\n"
    );
    let file = HostsFile::new("kh", text.as_str());
    let bad: Vec<(usize, String)> = file
        .unreadable()
        .into_iter()
        .map(|u| (u.place.line, u.reason))
        .collect();
    let lines: Vec<usize> = bad.iter().map(|(l, _)| *l).collect();
    assert_eq!(lines, [3, 4, 5, 6, 7], "{bad:?}");
    assert!(bad[0].1.contains("no key"), "{bad:?}");
    assert!(bad[1].1.contains("cannot be decoded"), "{bad:?}");
    assert!(bad[2].1.contains("unknown marker @future"), "{bad:?}");
    assert!(bad[3].1.contains("malformed hashed host name"), "{bad:?}");
    assert!(bad[4].1.contains("ssh-ed25519 but no key"), "{bad:?}");
    assert_eq!(
        check(&[file], "node1", &key(K1)),
        HostKeyStatus::Known { at: at(8) }
    );
    assert!(
        HostsFile::new("kh", format!("# only\nnode1 {K1}\n"))
            .unreadable()
            .is_empty()
    );
}

#[test]
fn host_key_alias_replaces_host_and_port() {
    assert_eq!(
        lookup_name("10.0.0.5", 2222, Some("Cp-1.Fleet")),
        "cp-1.fleet"
    );
    assert_eq!(lookup_name("10.0.0.5", 2222, None), "[10.0.0.5]:2222");
    let text = format!("cp-1.fleet {K1}\n");
    assert_eq!(
        check(
            &[HostsFile::new("kh", text)],
            &lookup_name("10.0.0.5", 2222, Some("cp-1.fleet")),
            &key(K1)
        ),
        HostKeyStatus::Known { at: at(1) }
    );
}

#[test]
fn hashed_entries_are_written_as_ssh_keygen_does_and_found_again() {
    // The first line of HASHED was made by `ssh-keygen -H`: same salt, same hash.
    let first = HASHED.lines().next().unwrap();
    let salt_b64 = first.split('|').nth(2).unwrap();
    let salt = Base64::decode_vec(salt_b64).unwrap();
    assert_eq!(
        entry_line("node1.example.com", &key(K1), Some(&salt)).unwrap(),
        format!("{first}\n")
    );

    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("known_hosts");
    assert_eq!(
        record(&path, "[10.0.0.9]:2222", &key(K3), true).unwrap(),
        None
    );
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.starts_with("|1|"), "{text}");
    assert!(!text.contains("10.0.0.9"), "{text}");
    assert_eq!(
        st(&text, "10.0.0.9", 2222, &key(K3)),
        HostKeyStatus::Known { at: at(1) }
    );
    assert_eq!(st(&text, "10.0.0.9", 22, &key(K3)), unknown());
    // Two hashed records of the same name do not share a salt.
    assert_eq!(record(&path, "other", &key(K3), true).unwrap(), None);
    let salts: Vec<String> = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(|l| l.split('|').nth(2).unwrap_or_default().to_string())
        .collect();
    assert_ne!(salts[0], salts[1]);
}

#[test]
fn record_never_adds_a_second_key_type_nor_a_duplicate() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("known_hosts");
    std::fs::write(&path, format!("node1 {K4_ECDSA}\nnode2 {K2}\n")).unwrap();
    let status = record(&path, "node1", &key(K1), false).unwrap();
    assert_eq!(
        status,
        Some(HostKeyStatus::Unknown {
            other_types: vec![(
                Place {
                    file: path.clone(),
                    line: 1
                },
                key(K4_ECDSA).algorithm()
            )],
            cert_authorities: vec![],
        })
    );
    assert_eq!(
        record(&path, "node2", &key(K2), false).unwrap(),
        Some(HostKeyStatus::Known {
            at: Place {
                file: path.clone(),
                line: 2
            }
        })
    );
    assert_eq!(
        record(&path, "node2", &key(K1), false).unwrap(),
        Some(HostKeyStatus::Changed {
            at: Place {
                file: path.clone(),
                line: 2
            }
        })
    );
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        format!("node1 {K4_ECDSA}\nnode2 {K2}\n"),
        "nothing was written"
    );
}

#[test]
fn concurrent_records_write_one_line_per_host() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("ssh").join("known_hosts");
    let barrier = std::sync::Barrier::new(16);
    std::thread::scope(|scope| {
        for i in 0..16 {
            let (path, barrier) = (&path, &barrier);
            scope.spawn(move || {
                let (name, k) = if i % 2 == 0 {
                    ("node1", K1)
                } else {
                    ("[node2]:2200", K2)
                };
                barrier.wait();
                record(path, name, &key(k), i % 4 < 2).unwrap();
            });
        }
    });
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text.lines().count(), 2, "{text}");
    let files = [HostsFile::new("kh", text.as_str())];
    assert!(matches!(
        check(&files, "node1", &key(K1)),
        HostKeyStatus::Known { .. }
    ));
    assert!(matches!(
        check(&files, "[node2]:2200", &key(K2)),
        HostKeyStatus::Known { .. }
    ));
}

#[test]
fn a_run_parses_each_file_once_and_again_when_it_changes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("known_hosts");
    let files = HostsFiles::default();
    // Missing: empty, as for ssh, and noticed once it appears.
    let missing = files.get(&path).unwrap();
    assert_eq!(check(&[&*missing], "node1", &key(K1)), unknown());
    std::fs::write(&path, format!("node1 {K1}\n")).unwrap();
    let first = files.get(&path).unwrap();
    assert!(matches!(
        check(&[&*first], "node1", &key(K1)),
        HostKeyStatus::Known { .. }
    ));
    // Unchanged: the very same parse, shared (also by clones of the cache).
    assert!(Arc::ptr_eq(&first, &files.clone().get(&path).unwrap()));
    // accept-new appends: the next connection sees the new line.
    assert_eq!(record(&path, "node2", &key(K2), false).unwrap(), None);
    let after = files.get(&path).unwrap();
    assert!(!Arc::ptr_eq(&first, &after));
    assert!(matches!(
        check(&[&*after], "node2", &key(K2)),
        HostKeyStatus::Known { .. }
    ));
}

#[test]
fn literal_and_wildcard_patterns_match_as_before() {
    assert!(glob("node1", "node1"));
    assert!(!glob("node1", "node10"));
    assert!(glob("node?", "node1"));
    assert!(glob("[10.0.0.*]:2222", "[10.0.0.7]:2222"));
    assert!(!glob("10.0.0.*", "10.0.1.7"));
    // Upper case in the file still matches: patterns are lower-cased once.
    let text = format!("Node1.Example {K1}\n!BAD*,*.example {K2}\n");
    assert!(matches!(
        st(&text, "node1.example", 22, &key(K1)),
        HostKeyStatus::Known { .. }
    ));
    assert_eq!(st(&text, "bad.example", 22, &key(K2)), unknown());
}
