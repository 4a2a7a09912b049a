//! Property tests of the inventory's validation: their own file, so the rules
//! read as one piece under the 500-line bound.

use super::*;
use proptest::prelude::*;

/// What sh or ssh would read as more than a name: OpenSSH 9.6's list
/// (ssh_valid_hostname), whitespace, and the globs, `~`, `!` and `#`.
fn special(c: char) -> bool {
    "'`\"$\\;&<>|(){},*?[]~!#^".contains(c) || c.is_whitespace() || c.is_control()
}

proptest! {
    #[test]
    fn an_address_with_a_shell_metacharacter_is_refused(
        head in "[a-z0-9.]{0,8}",
        bad in prop::sample::select("'`\"$\\;&<>|(){},*?~!#^\n\t".chars().collect::<Vec<_>>()),
        tail in "[a-z0-9.]{0,8}",
    ) {
        let value = format!("{head}{bad}{tail}");
        prop_assert!(address(&value).is_err(), "{value:?} accepted");
        prop_assert!(user(&value).is_err(), "{value:?} accepted as a user");
        prop_assert!(jump(&format!("core@{value}:22")).is_err(), "{value:?} accepted as a jump host");
    }

    #[test]
    fn whatever_an_address_accepts_is_plain_for_sh(value in "\\PC{1,20}") {
        if let Ok(accepted) = address(&value) {
            prop_assert!(!accepted.starts_with('-'));
            prop_assert!(!accepted.chars().any(special), "{accepted:?}");
        }
        if let Ok(accepted) = user(&value) {
            prop_assert!(!accepted.starts_with('-'));
            prop_assert!(!accepted.chars().any(special) && !accepted.contains(':'), "{accepted:?}");
        }
    }

    #[test]
    fn host_names_and_ip_addresses_are_accepted(
        labels in prop::collection::vec("[a-z0-9]([a-z0-9_-]{0,10}[a-z0-9])?", 1..4),
        v4 in any::<std::net::Ipv4Addr>(),
        v6 in any::<std::net::Ipv6Addr>(),
    ) {
        let name = labels.join(".");
        prop_assert_eq!(address(&name), Ok(name.clone()));
        prop_assert_eq!(address(&v4.to_string()), Ok(v4.to_string()));
        prop_assert_eq!(address(&format!("[{v6}]")), Ok(v6.to_string()));
        prop_assert_eq!(user(&labels[0]), Ok(labels[0].clone()));
    }
}

#[test]
fn leading_dashes_are_refused() {
    assert!(
        address("-oProxyCommand=x")
            .unwrap_err()
            .contains("starts with '-'")
    );
    assert!(user("-l").unwrap_err().contains("starts with '-'"));
    assert!(jump("-bastion").is_err());
    assert_eq!(
        address("a$b").unwrap_err(),
        "address `a$b` contains '$': a host name or IP address is letters, digits, '.', '_' \
             and '-' (fleetctl, like OpenSSH 9.6, refuses shell metacharacters: they would reach \
             the ProxyCommand's shell on this machine)"
    );
}
