//! The commands of the upgrade itself: pin a sysupdate config, stage an
//! image, reboot, run kubeadm. Each is a plain string (plus stdin data where
//! noted) so `apply --dry-run` prints exactly what `apply` runs.

use crate::ssh::quote;

/// Reads a URL from the node (the node reaches the hub; the laptop may not).
/// curl on Flatcar; wget as a fallback for minimal images.
pub fn fetch(url: &str) -> String {
    let u = quote(url);
    format!(
        "if command -v curl >/dev/null 2>&1; then curl -fsSL --max-time 20 {u}; \
         else wget -q -T 20 -O - {u}; fi"
    )
}

/// Writes the config given on stdin to `path` atomically (temporary file in
/// the same directory, then rename), keeps the previous file as
/// `<path>.fleetctl-backup`, renames every path in `disable` to
/// `<path>.fleetctl-disabled` (sysupdate only reads `*.conf`), and prints the
/// file back so the caller can compare it byte for byte.
pub fn pin_config(path: &str, disable: &[String]) -> String {
    let p = quote(path);
    let mut script = format!(
        "set -e; dir=$(dirname {p}); mkdir -p \"$dir\"; tmp=\"$dir/.fleetctl-$$.tmp\"; \
         cat > \"$tmp\"; chmod 0644 \"$tmp\"; \
         if [ -f {p} ]; then cp -p {p} {bak}; fi; mv -f \"$tmp\" {p}; ",
        bak = quote(&format!("{path}.fleetctl-backup"))
    );
    for d in disable {
        script.push_str(&format!(
            "if [ -e {f} ]; then mv -f {f} {off}; fi; ",
            f = quote(d),
            off = quote(&format!("{d}.fleetctl-disabled"))
        ));
    }
    script.push_str(&format!("cat {p}"));
    script
}

/// Stages the newest image the pinned config allows, as the sysext-bakery
/// drop-in does (marking a reboot as required only when the symlink moved),
/// then prints where the symlink points.
pub fn stage(component: &str) -> String {
    let link = quote(&format!("/etc/extensions/{component}.raw"));
    format!(
        "set -e; before=$(readlink {link} || true); \
         /usr/lib/systemd/systemd-sysupdate --component={c} update; \
         after=$(readlink {link} || true); \
         if [ \"$before\" != \"$after\" ]; then touch /run/reboot-required; fi; \
         echo \"$after\"",
        c = quote(component)
    )
}

/// Where the component's symlink points now: checked right before a reboot,
/// since the node's own sysupdate timer may have moved it.
pub fn staged_target(component: &str) -> String {
    format!(
        "readlink {}",
        quote(&format!("/etc/extensions/{component}.raw"))
    )
}

pub const BOOT_ID: &str = "cat /proc/sys/kernel/random/boot_id";

pub const KUBELET_VERSION: &str = "kubelet --version";

/// `systemctl reboot` returns before the machine goes down; the connection
/// then drops, which the caller expects.
pub const REBOOT: &str = "systemctl reboot";

/// A plain word stays as it is, so the journal reads like what an operator types.
fn word(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-+/".contains(c))
    {
        s.to_string()
    } else {
        quote(s)
    }
}

/// `--skip-phases addon/kube-proxy` every time: clusters built before
/// `proxy.disabled` was set still store `proxy: {}`, and kubeadm would
/// redeploy kube-proxy beside Cilium (upgrade apply never writes a skipped
/// phase back, and since v1.32 `upgrade node` has the addon phase too).
pub fn upgrade_apply(version: &str) -> String {
    format!(
        "kubeadm upgrade apply {} --skip-phases {} --yes",
        word(version),
        crate::plan::KUBEADM_SKIP_PHASES
    )
}

pub fn upgrade_node() -> String {
    format!(
        "kubeadm upgrade node --skip-phases {}",
        crate::plan::KUBEADM_SKIP_PHASES
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str, stdin: &str) -> (bool, String) {
        use std::io::Write;
        let mut child = std::process::Command::new("sh")
            .args(["-c", script])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    }

    #[test]
    fn pin_config_replaces_atomically_keeps_a_backup_and_disables_strays() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("sysupdate.kubernetes.d");
        std::fs::create_dir(&d).unwrap();
        let conf = d.join("kubernetes.conf");
        let stray = d.join("kubernetes-v1.32.conf");
        std::fs::write(&conf, "old\n").unwrap();
        std::fs::write(&stray, "stray\n").unwrap();
        let script = pin_config(
            conf.to_str().unwrap(),
            &[stray.to_string_lossy().into_owned()],
        );
        let (ok, echoed) = sh(&script, "new config\n");
        assert!(ok);
        assert_eq!(echoed, "new config\n");
        assert_eq!(std::fs::read_to_string(&conf).unwrap(), "new config\n");
        assert_eq!(
            std::fs::read_to_string(d.join("kubernetes.conf.fleetctl-backup")).unwrap(),
            "old\n"
        );
        assert!(!stray.exists());
        assert!(d.join("kubernetes-v1.32.conf.fleetctl-disabled").exists());
        let left: Vec<_> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left.len(), 3, "no temporary file left behind: {left:?}");
    }

    #[test]
    fn pin_config_creates_the_directory_and_quotes_paths() {
        let dir = tempfile::tempdir().unwrap();
        let conf = dir.path().join("it's here/kubernetes.conf");
        let (ok, echoed) = sh(&pin_config(conf.to_str().unwrap(), &[]), "x\n");
        assert!(ok);
        assert_eq!(echoed, "x\n");
    }

    #[test]
    fn kubeadm_commands_always_skip_kube_proxy() {
        assert_eq!(
            upgrade_apply("v1.35.3"),
            "kubeadm upgrade apply v1.35.3 --skip-phases addon/kube-proxy --yes"
        );
        assert_eq!(
            upgrade_node(),
            "kubeadm upgrade node --skip-phases addon/kube-proxy"
        );
    }
}
