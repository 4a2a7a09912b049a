use super::dial::prefer_recorded;
use super::*;
use crate::inventory::HostKeyChecking;
use crate::ssh::{Options, Target};
use russh::Preferred;
use russh::keys::{Algorithm, EcdsaCurve};

#[test]
fn recorded_host_key_types_are_offered_first() {
    let default = Preferred::default().key.to_vec();
    let ecdsa = Algorithm::Ecdsa {
        curve: EcdsaCurve::NistP256,
    };
    let ordered = prefer_recorded(&default, std::slice::from_ref(&ecdsa));
    assert_eq!(ordered[0], ecdsa);
    assert_eq!(ordered.len(), default.len());
    let rsa = prefer_recorded(&default, &[Algorithm::Rsa { hash: None }]);
    assert!(
        rsa[..3].iter().all(|a| matches!(a, Algorithm::Rsa { .. })),
        "{rsa:?}"
    );
    assert_eq!(prefer_recorded(&default, &[]), default);
}

#[test]
fn sessions_can_be_shared_across_tasks() {
    fn shareable<T: Send + Sync + 'static>() {}
    shareable::<Session>();
}

#[tokio::test]
async fn connect_timeout_names_the_node_when_no_banner_comes() {
    // A TCP listener that accepts and never speaks SSH.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let hold = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((sock, _)) = listener.accept().await {
            held.push(sock);
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let mut opts = Options::new(dir.path().join("known_hosts"), HostKeyChecking::Strict);
    opts.global_known_hosts = vec![];
    opts.connect_timeout = Duration::from_millis(300);
    let target = Target {
        node: "silent-1".into(),
        host: "127.0.0.1".into(),
        port,
        user: "core".into(),
        identity_files: vec![],
        jump: None,
        ..Target::default()
    };
    let err = connect(&target, &opts).await.unwrap_err();
    let msg = format!("{err:#}");
    assert!(
        msg.starts_with("silent-1: no SSH handshake with 127.0.0.1:"),
        "{msg}"
    );
    hold.abort();
}

#[tokio::test]
async fn refused_tcp_connection_names_the_node() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        global_known_hosts: vec![],
        ..Options::new(dir.path().join("known_hosts"), HostKeyChecking::Strict)
    };
    let target = Target {
        node: "gone-1".into(),
        host: "127.0.0.1".into(),
        port,
        user: "core".into(),
        identity_files: vec![],
        jump: None,
        ..Target::default()
    };
    let msg = format!("{:#}", connect(&target, &opts).await.unwrap_err());
    assert!(
        msg.starts_with(&format!(
            "gone-1: cannot connect to 127.0.0.1:{port} over SSH"
        )),
        "{msg}"
    );
}

#[tokio::test]
async fn a_failing_proxy_command_says_why_in_the_error() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        global_known_hosts: vec![],
        connect_timeout: Duration::from_secs(5),
        ..Options::new(dir.path().join("known_hosts"), HostKeyChecking::Strict)
    };
    let target = Target {
        node: "proxied-1".into(),
        host: "10.9.9.9".into(),
        port: 22,
        user: "core".into(),
        // Run as ssh runs it, `exec`ed, hence the inner sh for two commands.
        proxy_command: Some("sh -c 'echo no route to 10.9.9.9 >&2; exit 7'".into()),
        ..Target::default()
    };
    let msg = format!("{:#}", connect(&target, &opts).await.unwrap_err());
    assert!(
            msg.starts_with("proxied-1: ProxyCommand `sh -c 'echo no route to 10.9.9.9 >&2; exit 7'` ended (exit status: 7); its stderr: no route to 10.9.9.9"),
            "{msg}"
        );
    assert!(
        msg.contains("proxied-1: cannot connect to 10.9.9.9:22 through ProxyCommand"),
        "{msg}"
    );
}
