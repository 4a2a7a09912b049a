//! Tests of authentication: their own file, so the order of the methods tried
//! reads as one piece under the 500-line bound.

use super::*;

fn target(identity_files: Vec<PathBuf>) -> Target {
    Target {
        node: "w-2".into(),
        host: "10.0.0.2".into(),
        port: 22,
        user: "core".into(),
        identity_files,
        jump: None,
        ..Target::default()
    }
}

#[test]
fn failure_names_user_keys_and_what_to_check() {
    let attempts = Attempts {
            tried: vec!["/home/op/.ssh/id_ed25519 (ED25519 SHA256:abc)".into()],
            problems: vec!["/home/op/.ssh/id_rsa is passphrase-protected and there is no terminal to ask for the passphrase: load it into ssh-agent (`ssh-add /home/op/.ssh/id_rsa`) and run again".into()],
            partial: false,
        };
    let msg = attempts
        .failure(&target(vec!["/home/op/.ssh/id_ed25519".into()]), false)
        .to_string();
    assert!(
        msg.starts_with("w-2: authentication as \"core\" on 10.0.0.2:22 failed."),
        "{msg}"
    );
    assert!(
        msg.contains("Keys tried: /home/op/.ssh/id_ed25519 (ED25519 SHA256:abc)."),
        "{msg}"
    );
    assert!(msg.contains("ssh-add /home/op/.ssh/id_rsa"), "{msg}");
    assert!(msg.contains("~core/.ssh/authorized_keys"), "{msg}");
}

#[test]
fn failure_without_any_key_says_how_to_provide_one() {
    let msg = Attempts::default()
        .failure(&target(vec![]), false)
        .to_string();
    assert!(msg.contains("No key could be offered"), "{msg}");
    assert!(msg.contains("SSH_AUTH_SOCK is not set"), "{msg}");
    assert!(msg.contains("identity_file:"), "{msg}");
}

#[tokio::test]
async fn encrypted_key_without_terminal_fails_with_advice_and_plain_key_is_cached() {
    let dir = tempfile::tempdir().unwrap();
    let make = |name: &str, pass: &str| {
        let path = dir.path().join(name);
        let status = std::process::Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", pass, "-f"])
            .arg(&path)
            .status();
        match status {
            Ok(s) if s.success() => Some(path),
            _ => None,
        }
    };
    let (Some(locked), Some(plain)) = (make("locked", "secret"), make("plain", "")) else {
        eprintln!("ssh-keygen not available: skipping");
        return;
    };
    let cache = KeyCache::default();
    let err = cache.load(&locked, false).await.unwrap_err().to_string();
    assert!(err.contains("passphrase-protected"), "{err}");
    assert!(
        err.contains(&format!("ssh-add {}", locked.display())),
        "{err}"
    );

    let first = cache.load(&plain, false).await.unwrap();
    std::fs::remove_file(&plain).unwrap();
    let again = cache.load(&plain, false).await.unwrap();
    assert!(
        Arc::ptr_eq(&first, &again),
        "second load comes from the cache"
    );
}
