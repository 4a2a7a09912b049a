//! Tests of the inventory's validation: their own file, so the rules read as
//! one piece under the 500-line bound.

use super::*;

#[test]
fn node_names_follow_rfc_1123_subdomains() {
    for ok in ["cp-1", "w1", "a", "node.example.com", "1-2", "a.b-c.d"] {
        assert_eq!(node_name(ok), Ok(()), "{ok}");
    }
    for bad in [
        "", "Cp-1", "-a", "a-", "a..b", "a_b", ".a", "a.", "ä", "a b",
    ] {
        assert!(node_name(bad).is_err(), "{bad} should be refused");
    }
    assert!(node_name(&"a".repeat(253)).is_ok());
    assert_eq!(
        node_name(&"a".repeat(254)).unwrap_err(),
        "node name `aaaaaaaaaaaaaaaaaaaa…` is 254 characters long; Kubernetes allows at most 253"
    );
}

#[test]
fn addresses_refuse_user_and_port_but_accept_ipv6() {
    assert_eq!(address("10.0.0.1").unwrap(), "10.0.0.1");
    assert_eq!(address("cp-1.example").unwrap(), "cp-1.example");
    assert_eq!(address("fd00::1").unwrap(), "fd00::1");
    assert_eq!(address("[fd00::1]").unwrap(), "fd00::1");
    assert_eq!(
        address("10.0.0.1:22").unwrap_err(),
        "address `10.0.0.1:22` contains ':': put the port in `port:`, not in the address"
    );
    assert!(address("core@10.0.0.1").is_err());
    assert!(address("").is_err());
    assert!(address("a b").is_err());
}

#[test]
fn hub_must_be_http_and_loses_trailing_slashes() {
    assert_eq!(
        hub("https://extensions.flatcar.org/extensions/").unwrap(),
        "https://extensions.flatcar.org/extensions"
    );
    assert_eq!(
        hub("http://10.0.0.1:8000//").unwrap(),
        "http://10.0.0.1:8000"
    );
    assert_eq!(
        hub("ftp://x").unwrap_err(),
        "hub `ftp://x` is not an http(s) URL: expected e.g. https://extensions.flatcar.org/extensions"
    );
    assert!(hub("https://").is_err());
    assert!(hub("https:///path").is_err());
    assert!(hub("https://a b").is_err());
}

#[test]
fn hub_credentials_and_query_tokens_are_refused() {
    let err = hub("https://alice:hunter2@mirror.example/ext").unwrap_err();
    assert!(err.contains("carries credentials"), "{err}");
    assert!(hub("https://token@mirror.example").is_err());
    let err = hub("https://mirror.example/ext?sig=abc").unwrap_err();
    assert!(err.contains("query or fragment"), "{err}");
    // An '@' in the path is not a credential.
    assert!(hub("https://mirror.example/@team/ext").is_ok());
}

#[test]
fn jump_accepts_every_optional_part() {
    assert_eq!(jump("").unwrap(), None);
    assert_eq!(jump("  ").unwrap(), None);
    let full = jump("core@bastion:2222").unwrap().unwrap();
    assert_eq!(
        full,
        Jump {
            user: Some("core".into()),
            host: "bastion".into(),
            port: Some(2222)
        }
    );
    let bare = jump("bastion").unwrap().unwrap();
    assert_eq!((bare.user, bare.port), (None, None));
    let v6 = jump("[fd00::1]:22").unwrap().unwrap();
    assert_eq!((v6.host.as_str(), v6.port), ("fd00::1", Some(22)));
    let v6_bare = jump("fd00::1").unwrap().unwrap();
    assert_eq!((v6_bare.host.as_str(), v6_bare.port), ("fd00::1", None));
    assert_eq!(
        jump("core@bastion:ssh").unwrap_err(),
        "jump `core@bastion:ssh` has port `ssh`, which is not 1 to 65535: expected user@host:port"
    );
    assert!(jump("@bastion").is_err());
    assert!(jump("core@:22").is_err());
    assert!(jump("bastion:0").is_err());
    assert!(jump("[fd00::1").is_err());
    assert!(jump("[fd00::1]x").is_err());
}

#[test]
fn paths_expand_home_and_follow_the_inventory() {
    let home = Path::new("/home/op");
    let base = Path::new("/etc/fleet");
    assert_eq!(
        local_path("~/.ssh/id", base, Some(home)).unwrap(),
        Path::new("/home/op/.ssh/id")
    );
    assert_eq!(local_path("~", base, Some(home)).unwrap(), home);
    assert_eq!(
        local_path("keys/id", base, Some(home)).unwrap(),
        Path::new("/etc/fleet/keys/id")
    );
    assert_eq!(
        local_path("/abs/id", base, Some(home)).unwrap(),
        Path::new("/abs/id")
    );
    assert!(local_path("~/.ssh/id", base, None).is_err());
    assert!(local_path("~bob/id", base, Some(home)).is_err());
    assert!(local_path("", base, Some(home)).is_err());
}

#[test]
fn roles_and_host_key_checking_name_the_choices() {
    assert_eq!(role("worker").unwrap(), Role::Worker);
    assert_eq!(role("control-plane").unwrap(), Role::ControlPlane);
    assert_eq!(
        role("master").unwrap_err(),
        "unknown role `master`, expected `control-plane` or `worker`"
    );
    assert_eq!(
        host_key_checking("accept-new").unwrap(),
        HostKeyChecking::AcceptNew
    );
    assert!(host_key_checking("yes").is_err());
}
