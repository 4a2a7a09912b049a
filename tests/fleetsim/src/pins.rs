//! The kubernetes MatchPatterns a node's sysupdate configs hold, recorded
//! with every event so a test can tell which pin a node had when it was
//! rebooted or upgraded.

use std::fs;
use std::path::Path;

/// `MatchPattern=` values of every `*.conf` in `dir`, in file-name order.
/// A missing or unreadable directory has no pins.
pub fn kubernetes_pins(dir: &Path) -> Vec<String> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<_> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "conf"))
        .collect();
    files.sort();
    files
        .iter()
        .filter_map(|f| fs::read_to_string(f).ok())
        .flat_map(|text| {
            text.lines()
                .filter_map(|l| l.trim().strip_prefix("MatchPattern="))
                .map(|p| p.trim().to_string())
                .collect::<Vec<_>>()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_patterns_in_file_order() {
        let dir = std::env::temp_dir().join(format!("fleetsim-pins-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        fs::write(
            dir.join("kubernetes.conf"),
            "[Source]\nMatchPattern=kubernetes-v1.34.@v-%a.raw\n",
        )
        .unwrap();
        fs::write(
            dir.join("kubernetes-v1.32.conf"),
            "MatchPattern=kubernetes-v1.32.@v-%a.raw\n",
        )
        .unwrap();
        fs::write(dir.join("notes.txt"), "MatchPattern=ignored\n").unwrap();
        assert_eq!(
            kubernetes_pins(&dir),
            ["kubernetes-v1.32.@v-%a.raw", "kubernetes-v1.34.@v-%a.raw"]
        );
        fs::remove_dir_all(&dir).unwrap();
        assert!(kubernetes_pins(&dir).is_empty());
    }
}
