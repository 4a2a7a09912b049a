//! The listings as kubectl prints them, and what no field of an object can
//! do to them.

use super::*;

const IMAGE: &str = "ghcr.io/kubereboot/kured:1.23.0";

fn m() -> Marker {
    Marker::fixed("0123456789abcdef")
}

/// `kubectl get daemonsets -A -o jsonpath=…` on a cluster with Kured from
/// its Helm chart (release `kured` in namespace `kured`), Cilium, and
/// nothing unusual: names, images, programs, hostPID and privileged only.
fn listing() -> String {
    let m = m();
    let m = m.as_str();
    format!(
        "{m}daemonset{m}kube-system{m}cilium{m}\
         {m}container{m}cilium-agent{m}quay.io/cilium/cilium:v1.18.1@sha256:0b4f{m}cilium-agent{m}\
         {m}daemonset{m}kured{m}kured{m}true\
         {m}container{m}kured{m}{IMAGE}{m}/usr/bin/kured{m}true\
         {m}daemonset{m}monitoring{m}node-exporter{m}true\
         {m}container{m}node-exporter{m}quay.io/prometheus/node-exporter:v1.9.1{m}{m}"
    )
}

/// `kubectl -n kured get daemonset kured -o jsonpath=…containers[0]…`:
/// Kured's own container, lists as JSON as kubectl ≥ 1.19 prints them.
const SETTINGS: &str = concat!(
    "kured\t[\"/usr/bin/kured\"]\t[\"--ds-name=kured\",\"--ds-namespace=kured\",\"--metrics-port=8080\",\"--notify-url=slack://T0/B0/secret\"]\t",
    "[{\"name\":\"KURED_NODE_ID\",\"valueFrom\":{\"fieldRef\":{\"apiVersion\":\"v1\",\"fieldPath\":\"spec.nodeName\"}}},{\"name\":\"KURED_CONCURRENCY\",\"value\":\"2\"}]\t",
    "[{\"secretRef\":{\"name\":\"kured-notify\"}}]",
);

#[test]
fn parses_the_daemonset_listing_and_kureds_settings() {
    let sets = parse_daemonsets(&listing(), &m()).unwrap();
    let names: Vec<String> = sets
        .iter()
        .map(|d| format!("{}/{} {}", d.namespace, d.name, d.host_pid))
        .collect();
    assert_eq!(
        names,
        [
            "kube-system/cilium false",
            "kured/kured true",
            "monitoring/node-exporter true"
        ]
    );
    let kured = &sets[1].containers[0];
    assert_eq!(kured.image, IMAGE);
    assert_eq!(kured.command, ["/usr/bin/kured"]);
    assert!(kured.privileged);
    assert!(kured.args.is_empty() && kured.env.is_empty(), "not listed");
    let exporter = &sets[2].containers[0];
    assert!(exporter.command.is_empty() && exporter.env.is_empty() && !exporter.env_from);
    assert!(!exporter.privileged);
    assert!(parse_daemonsets("", &m()).unwrap().is_empty());

    let settings = parse_settings(SETTINGS).unwrap();
    assert_eq!(settings.name, "kured");
    assert_eq!(settings.command, ["/usr/bin/kured"]);
    assert_eq!(settings.args[1], "--ds-namespace=kured");
    assert_eq!(
        settings.env["KURED_NODE_ID"], None,
        "valueFrom has no literal"
    );
    assert_eq!(settings.env["KURED_CONCURRENCY"].as_deref(), Some("2"));
    assert!(settings.env_from);
    let bare = parse_settings("kured\t\t\t\t").unwrap();
    assert!(bare.command.is_empty() && bare.args.is_empty() && !bare.env_from);
}

#[test]
fn a_newline_or_tab_in_a_field_forges_no_record() {
    // What the tab-separated listing read as a second DaemonSet, a Kured in
    // kube-system: a newline and a forged record inside a command (the API
    // server accepts any string there) and a tab inside an image.
    let m = m();
    let m = m.as_str();
    let forged = "x\ndaemonset\tkube-system\tkured\ncontainer\tkured\tkured\t/usr/bin/kured";
    let text = format!(
        "{m}daemonset{m}dev{m}tool{m}\
         {m}container{m}tool{m}busybox\tkured{m}{forged}{m}"
    );
    let sets = parse_daemonsets(&text, &Marker::fixed("0123456789abcdef")).unwrap();
    assert_eq!(
        sets.len(),
        1,
        "one record, whatever its fields hold: {sets:?}"
    );
    assert_eq!(
        (sets[0].namespace.as_str(), sets[0].name.as_str()),
        ("dev", "tool")
    );
    assert_eq!(sets[0].containers[0].command, [forged]);
    assert_eq!(sets[0].containers[0].image, "busybox\tkured");
    // An object cannot know the marker of a listing made after it: every
    // marker is drawn anew, 128 bits.
    let (a, b) = (Marker::new().unwrap(), Marker::new().unwrap());
    assert_ne!(a, b);
    assert_eq!(a.as_str().len(), "@@fleetctl-@@".len() + 32);
    // A field that repeats another listing's marker is only text here.
    let other = Marker::fixed("ffffffffffffffff");
    let text = format!(
        "{m}daemonset{m}dev{m}tool{m}{m}container{m}tool{m}busybox{m}a{o}daemonset{o}kube-system{o}kured{o}true{m}",
        o = other.as_str()
    );
    let sets = parse_daemonsets(&text, &Marker::fixed("0123456789abcdef")).unwrap();
    assert_eq!(sets.len(), 1);
}

#[test]
fn pods_carry_host_pid_and_their_owner() {
    let m = m();
    let m = m.as_str();
    let text = format!(
        "{m}pod{m}kube-system{m}kured-x7k2p{m}true{m}DaemonSet\
         {m}container{m}kured{m}{IMAGE}{m}/usr/bin/kured{m}true\
         {m}pod{m}dev{m}decoy{m}{m}\
         {m}container{m}app{m}evil.example/kured:1{m}{m}"
    );
    let pods = parse_pods(&text, &Marker::fixed("0123456789abcdef")).unwrap();
    assert_eq!(pods.len(), 2);
    assert!(pods[0].host_pid && pods[0].containers[0].privileged);
    assert_eq!(pods[0].owner, "DaemonSet");
    assert!(!pods[1].host_pid && !pods[1].containers[0].privileged);
    assert_eq!(pods[1].owner, "");
}

#[test]
fn output_fleetctl_does_not_understand_is_an_error_not_a_guess() {
    let m = m();
    let s = m.as_str();
    let err = parse_daemonsets(&format!("{s}container{s}kured{s}kured{s}{s}"), &m).unwrap_err();
    assert_eq!(err.to_string(), "a container before any daemonset");
    let err = parse_daemonsets(&format!("{s}daemonset{s}kured"), &m).unwrap_err();
    assert_eq!(
        err.to_string(),
        "record 1 (daemonset) ends after 1 of its 3 fields"
    );
    // The old tab-separated listing, or a table, is not this listing.
    let err = parse_daemonsets("daemonset\tkured\tkured\n", &m).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("kubectl printed something before the first record")
    );
    let err = parse_daemonsets(&format!("{s}NAME{s}READY"), &m).unwrap_err();
    assert_eq!(
        err.to_string(),
        "record 1: not a daemonset or container record: \"NAME\""
    );
    // What kubectl older than 1.19 prints for a list.
    let old = "kured\t[/usr/bin/kured]\t\t\t";
    let err = format!("{:#}", parse_settings(old).unwrap_err());
    assert!(err.contains("fleetctl needs a newer kubectl"), "{err}");
    assert!(parse_settings("kured\t\t\t\t\nkured\t\t\t\t").is_err());
}
