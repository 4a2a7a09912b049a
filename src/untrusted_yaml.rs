//! YAML that a node or the cluster sends (a kubelet's config.yaml, the
//! kubeadm-config and kubelet-config ConfigMaps), parsed with every limit
//! serde-saphyr offers set here, explicitly, rather than its defaults
//! (serde-saphyr 2.2 `Budget`, `AliasLimits`: its defaults allow 1,000,000
//! events, 50,000 aliases, 64 MiB of scalars and 1,024 documents). These
//! documents are a few KiB, one document, written by kubeadm: the limits
//! leave room for a hand-edited config many times that size and still
//! refuse a billion laughs, a nesting bomb or a document storm long before
//! they cost time or memory. The input itself is already bounded (a command
//! prints at most 32 MiB).

use serde::de::DeserializeOwned;

/// The limits, in one place so a reviewer reads them at once.
fn options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        budget: serde_saphyr::budget! {
            max_reader_input_bytes: Some(32 << 20),
            simple_key_max_lookahead: 1_024,
            flow_nesting_limit: 32,
            max_events: 200_000,
            max_aliases: 100,
            max_anchors: 100,
            max_recorded_anchor_events: 10_000,
            max_recorded_anchor_bytes: 1 << 20,
            max_depth: 32,
            max_inclusion_depth: 0,
            max_documents: 1,
            max_nodes: 100_000,
            max_total_scalar_bytes: 32 << 20,
            max_total_comment_bytes: 4 << 20,
            max_buffered_comment_events: 32,
            max_merge_keys: 100,
            enforce_alias_anchor_ratio: true,
            alias_anchor_min_aliases: 10,
            alias_anchor_ratio_multiplier: 10,
        },
        alias_limits: serde_saphyr::alias_limits! {
            max_total_replayed_events: 10_000,
            max_replay_stack_depth: 16,
            max_alias_expansions_per_anchor: 100,
        },
        with_snippet: false,
    }
}

/// Parses one YAML document from a remote source within [`options`]' limits.
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, serde_saphyr::Error> {
    serde_saphyr::from_str_with_options(text, options())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_billion_laughs_and_a_nesting_bomb_are_refused_quickly() {
        let mut laughs = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
        for n in 1..10 {
            laughs.push_str(&format!(
                "{}: &{} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n",
                (b'a' + n) as char,
                (b'a' + n) as char,
                p = (b'a' + n - 1) as char
            ));
        }
        let nested = format!("{}1{}", "[".repeat(10_000), "]".repeat(10_000));
        let documents = "a: 1\n---\n".repeat(1_000);
        let started = std::time::Instant::now();
        for bomb in [laughs, nested, documents] {
            assert!(from_str::<serde_json::Value>(&bomb).is_err());
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
    }

    #[test]
    fn a_kubelet_config_parses() {
        let v: serde_json::Value =
            from_str("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncgroupDriver: systemd\n")
                .unwrap();
        assert_eq!(v["cgroupDriver"], "systemd");
    }
}
