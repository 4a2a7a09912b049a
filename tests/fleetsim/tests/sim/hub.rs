//! The extension hub: SHA256SUMS and images as sysupdate fetches them,
//! configurable per scenario, with publish and the hub-down fault.

use fleetsim::hub::{get, sha256_hex};

use crate::common::{small, start};

fn sums(url: &str) -> Vec<(String, String)> {
    let (status, body) = get(&format!("{url}/kubernetes/SHA256SUMS")).unwrap();
    assert_eq!(status, 200);
    String::from_utf8(body)
        .unwrap()
        .lines()
        .map(|l| {
            let (sum, file) = l.split_once("  ").expect("`<sha256>  <file>` lines");
            (sum.to_string(), file.to_string())
        })
        .collect()
}

#[test]
fn serves_what_the_scenario_says_with_matching_sums() {
    let fleet = start(small(0).hub(|h| {
        h.patches = 2;
        h.patches_for.insert("v1.35".into(), 4);
        h.missing = vec!["v1.36".into()];
    }));
    let url = fleet.hub_url();
    let listed = sums(url);
    let files: Vec<&str> = listed.iter().map(|(_, f)| f.as_str()).collect();
    assert!(files.contains(&"kubernetes-v1.30.0-x86-64.raw"));
    assert!(files.contains(&"kubernetes-v1.34.1-x86-64.raw"));
    assert!(!files.contains(&"kubernetes-v1.34.2-x86-64.raw"));
    assert!(files.contains(&"kubernetes-v1.35.3-x86-64.raw"));
    assert!(!files.iter().any(|f| f.starts_with("kubernetes-v1.36.")));
    assert!(files.contains(&"kubernetes-v1.38.1-x86-64.raw"));
    assert_eq!(files.len(), 8 * 2 + 2);
    for (sum, file) in &listed {
        let (status, body) = get(&format!("{url}/kubernetes/{file}")).unwrap();
        assert_eq!(status, 200);
        assert_eq!(&sha256_hex(&body), sum, "{file}");
    }
    let (status, _) = get(&format!("{url}/kubernetes/kubernetes-v1.36.0-x86-64.raw")).unwrap();
    assert_eq!(status, 404);
}

#[test]
fn a_down_hub_refuses_and_comes_back() {
    let fleet = start(small(0));
    let url = format!("{}/kubernetes/SHA256SUMS", fleet.hub_url());
    fleet.faults(|f| f.hub_down = true).unwrap();
    assert_eq!(get(&url).unwrap().0, 503);
    fleet.faults(|f| f.hub_down = false).unwrap();
    assert_eq!(get(&url).unwrap().0, 200);
}

#[test]
fn publish_adds_a_newer_patch_mid_run() {
    let fleet = start(small(0));
    let url = fleet.hub_url();
    let image = "kubernetes-v1.34.9-x86-64.raw";
    assert!(!sums(url).iter().any(|(_, f)| f == image));
    fleet.publish("v1.34.9").unwrap();
    let (sum, _) = sums(url).into_iter().find(|(_, f)| f == image).unwrap();
    let (status, body) = get(&format!("{url}/kubernetes/{image}")).unwrap();
    assert_eq!(status, 200);
    assert_eq!(sha256_hex(&body), sum);
    // A squashfs image whose content names its version.
    let file = fleet.dir().join("downloaded.raw");
    std::fs::write(&file, &body).unwrap();
    assert_eq!(
        fleetsim::image::version_of(&file).unwrap().to_string(),
        "v1.34.9"
    );
}
