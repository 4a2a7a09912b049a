//! `systemd-sysext status|list`: what is merged into /usr right now (the
//! kubernetes extension of the last boot) and which images sit in
//! /etc/extensions. Merging itself happens at boot, done by the supervisor.

use std::fs;

use anyhow::Result;

use super::util::{systemd_timestamp, table};
use super::{Env, say};

const NAME: &str = "systemd-sysext";

pub fn run(env: &mut Env, args: &[String]) -> Result<i32> {
    let mut legend = true;
    let mut verb = None;
    for a in args {
        match a.as_str() {
            "--no-pager" => {}
            "--no-legend" => legend = false,
            "status" | "list" if verb.is_none() => verb = Some(a.as_str()),
            _ => return Ok(env.unsupported(NAME, args)),
        }
    }
    match verb.unwrap_or("status") {
        "status" => status(env, legend),
        _ => Ok(list(env, legend)),
    }
}

fn status(env: &mut Env, legend: bool) -> Result<i32> {
    let boot = env.boot()?;
    let mut rows = Vec::new();
    if legend {
        rows.push(vec![
            "HIERARCHY".into(),
            "EXTENSIONS".into(),
            "SINCE".into(),
        ]);
    }
    rows.push(vec!["/opt".into(), "none".into(), "-".into()]);
    if boot.kubernetes.is_empty() {
        rows.push(vec!["/usr".into(), "none".into(), "-".into()]);
    } else {
        rows.push(vec![
            "/usr".into(),
            "kubernetes".into(),
            systemd_timestamp(boot.booted_at),
        ]);
    }
    let _ = write!(env.out, "{}", table(&rows, 1));
    Ok(0)
}

fn list(env: &mut Env, legend: bool) -> i32 {
    let dir = env.path("/etc/extensions");
    let mut images: Vec<(String, f64)> = fs::read_dir(&dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    let stem = name.strip_suffix(".raw")?.to_string();
                    let mtime = fs::metadata(e.path())
                        .and_then(|m| m.modified())
                        .ok()
                        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                        .map(|d| d.as_secs_f64())
                        .unwrap_or(0.0);
                    Some((stem, mtime))
                })
                .collect()
        })
        .unwrap_or_default();
    images.sort_by(|a, b| a.0.cmp(&b.0));
    if images.is_empty() {
        say!(env, "No images found.");
        return 0;
    }
    let mut rows = Vec::new();
    if legend {
        rows.push(vec![
            "NAME".into(),
            "TYPE".into(),
            "PATH".into(),
            "TIME".into(),
        ]);
    }
    for (name, mtime) in images {
        rows.push(vec![
            name.clone(),
            "raw".into(),
            format!("/etc/extensions/{name}.raw"),
            systemd_timestamp(mtime),
        ]);
    }
    let _ = write!(env.out, "{}", table(&rows, 1));
    0
}

#[cfg(test)]
mod tests {
    use super::super::testutil::Node;

    #[test]
    fn status_shows_the_extension_merged_at_boot() {
        let node = Node::worker("w1", "v1.34.2");
        let r = node.run("systemd-sysext", &["status"]);
        assert_eq!(r.code, 0);
        let lines: Vec<&str> = r.stdout.lines().collect();
        assert_eq!(lines[0], "HIERARCHY EXTENSIONS SINCE");
        assert_eq!(lines[1], "/opt      none       -");
        assert!(lines[2].starts_with("/usr      kubernetes "));
        assert!(lines[2].ends_with(" UTC"));
    }

    #[test]
    fn list_shows_images_in_etc_extensions() {
        let node = Node::worker("w1", "v1.34.2");
        assert_eq!(
            node.run("systemd-sysext", &["list"]).stdout,
            "No images found.\n"
        );
        node.write("/etc/extensions/kubernetes.raw", "image");
        let r = node.run("systemd-sysext", &["list", "--no-legend"]);
        assert!(
            r.stdout
                .starts_with("kubernetes raw /etc/extensions/kubernetes.raw ")
        );
        assert_eq!(node.run("systemd-sysext", &["merge"]).code, 1);
    }
}
