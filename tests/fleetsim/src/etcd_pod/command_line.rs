//! etcdctl's command line as the container model reads it: its flags and
//! other words, and the endpoints rewritten to this node's member (the
//! pod's `127.0.0.1:2379` is the node's address in the sim; `mod.rs`).

use super::CLIENT_PORT;

/// etcdctl's global flags that take a value.
const VALUE_FLAGS: &[&str] = &[
    "endpoints",
    "cacert",
    "cert",
    "key",
    "write-out",
    "w",
    "dial-timeout",
    "command-timeout",
    "keepalive-time",
    "keepalive-timeout",
    "user",
    "password",
    "discovery-srv",
    "discovery-srv-name",
];

/// An etcdctl command line: its flags (name, value) and its other words.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Words {
    pub flags: Vec<(String, Option<String>)>,
    pub rest: Vec<String>,
}

pub(super) fn split(argv: &[String]) -> Words {
    let mut w = Words::default();
    let mut it = argv.iter();
    while let Some(a) = it.next() {
        let Some(body) = a.strip_prefix("--").or_else(|| a.strip_prefix('-')) else {
            w.rest.push(a.clone());
            continue;
        };
        match body.split_once('=') {
            Some((n, v)) => w.flags.push((n.to_string(), Some(v.to_string()))),
            None if VALUE_FLAGS.contains(&body) => {
                w.flags.push((body.to_string(), it.next().cloned()))
            }
            None => w.flags.push((body.to_string(), None)),
        }
    }
    w
}

/// The endpoint list with the local member's address in place of the pod's
/// own loopback.
pub(super) fn local_endpoints(value: &str, address: &str) -> String {
    value
        .split(',')
        .map(|e| {
            let (scheme, host) = match e.split_once("://") {
                Some((s, h)) => (Some(s), h),
                None => (None, e),
            };
            let host = match host {
                h if h == format!("127.0.0.1:{CLIENT_PORT}")
                    || h == format!("localhost:{CLIENT_PORT}") =>
                {
                    format!("{address}:{CLIENT_PORT}")
                }
                h => h.to_string(),
            };
            match scheme {
                Some(s) => format!("{s}://{host}"),
                None => host,
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

pub(super) fn json_output(flags: &[(String, Option<String>)]) -> bool {
    flags
        .iter()
        .any(|(n, v)| (n == "w" || n == "write-out") && v.as_deref() == Some("json"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn the_local_endpoint_is_this_nodes_member() {
        assert_eq!(
            local_endpoints("https://127.0.0.1:2379", "127.1.2.10"),
            "https://127.1.2.10:2379"
        );
        assert_eq!(
            local_endpoints("localhost:2379,https://127.1.2.11:2379", "127.1.2.10"),
            "127.1.2.10:2379,https://127.1.2.11:2379"
        );
        let w = split(&words(
            "--endpoints x --cacert=/a snapshot save /var/lib/etcd/s.db -w json",
        ));
        assert_eq!(w.rest, words("snapshot save /var/lib/etcd/s.db"));
        assert_eq!(w.flags[0], ("endpoints".into(), Some("x".into())));
        assert_eq!(w.flags[2], ("w".into(), Some("json".into())));
    }
}
