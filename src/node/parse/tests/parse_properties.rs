//! The section parser over random lines: it never panics and keeps a
//! section's body exact.

use proptest::prelude::*;

use super::*;

/// Lines that drive the section parser through every state.
fn line() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("@@fleetctl:begin kubernetes-running@@".to_string()),
        Just("@@fleetctl:begin kubernetes-config /etc/a.conf@@".to_string()),
        Just("@@fleetctl:begin nodes@@".to_string()),
        Just("@@fleetctl:begin kube-system@@".to_string()),
        Just("{\"kind\":\"List\",\"items\":[".to_string()),
        Just("@@fleetctl:stderr@@".to_string()),
        "@@fleetctl:end -?[0-9]{0,12}@@",
        Just("@@fleetctl:@@".to_string()),
        Just("@@fleetctl:begin @@".to_string()),
        Just("Kubernetes v1.2.3".to_string()),
        Just("MatchPattern=kubernetes-v1.37.@v-%a.raw".to_string()),
        Just("(NotFound)".to_string()),
        Just("{\"items\":[".to_string()),
        ".{0,20}",
    ]
}

fn lines() -> impl Strategy<Value = String> {
    (prop::collection::vec(line(), 0..30), prop::bool::ANY)
        .prop_map(|(lines, crlf)| lines.join(if crlf { "\r\n" } else { "\n" }))
}

proptest! {
    #[test]
    fn parse_facts_never_panics(text in any::<String>()) {
        let _ = parse_facts(&text);
    }

    #[test]
    fn parse_facts_never_panics_on_section_soup(text in lines()) {
        let _ = parse_facts(&text);
    }

    #[test]
    fn parse_facts_never_panics_on_bytes(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = parse_facts(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn parse_cluster_never_panics(text in any::<String>()) {
        let _ = parse_cluster(&text);
    }

    #[test]
    fn parse_cluster_never_panics_on_section_soup(text in lines()) {
        let _ = parse_cluster(&text);
    }

    #[test]
    fn detect_pin_never_panics(component in ".{0,12}", content in any::<String>()) {
        let _ = detect_pin(&component, &content);
    }

    #[test]
    fn detect_pin_reads_any_pinned_minor(major in 0u64..100, minor in 0u64..1000) {
        let content = format!("[Source]\nMatchPattern=kubernetes-v{major}.{minor}.@v-%a.raw\n");
        prop_assert_eq!(
            detect_pin("kubernetes", &content),
            Pin::Pinned(Minor::new(major, minor))
        );
    }

    #[test]
    fn image_version_never_panics(component in ".{0,12}", name in any::<String>()) {
        let _ = image_version(&component, &name);
    }

    #[test]
    fn config_content_survives_the_round_trip(content in "[^\r]{0,200}") {
        // Whatever a config holds (bar a marker line), the parser gives it
        // back exactly as the script printed it.
        prop_assume!(!content.lines().any(|l| l.starts_with("@@fleetctl:")));
        let output = section("kubernetes-config /etc/sysupdate.kubernetes.d/x.conf", &content, "", 0);
        let facts = parse_facts(&output).unwrap();
        prop_assert_eq!(&facts.kubernetes.configs[0].content, &content);
    }
}
