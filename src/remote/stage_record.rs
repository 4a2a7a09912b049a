//! Which sysexts a node's next reboot changes, recorded on the node when
//! fleetctl stages them: `/var/lib/fleetctl/staged/<component>` holds the
//! boot id the symlink was moved in, then the symlink's previous target.
//! Read back by the facts script (`staged-record` sections) so that a
//! rollback knows what the last reboot changed (`plan::rollback`): two
//! components recorded in the same boot, both running what they were
//! moved to, changed in the same reboot.
//!
//! Written only when the symlink's target really changed: a stage that
//! found the node already there (a rerun, sysupdate with nothing newer)
//! leaves the record of the change that did happen.

use crate::shell::quote;

use super::upgrade::{BOOT_ID, current_symlink};

/// The directory of the records.
pub const DIR: &str = "/var/lib/fleetctl/staged";

/// The record of `component`.
pub fn path(component: &str) -> String {
    format!("{DIR}/{component}")
}

/// `stage` (a command that prints the symlink's new target last, and may
/// exit non-zero), recording the change when the target moved. The record
/// is written atomically; the output and exit status are the stage's own.
pub fn recorded(component: &str, stage: &str) -> String {
    let link = quote(&current_symlink(component));
    let record = quote(&path(component));
    let tmp = quote(&format!("{}.tmp", path(component)));
    format!(
        "fleetctl_was=$(readlink {link} 2>/dev/null || true); \
         fleetctl_now=$( {stage} ) || exit $?; \
         fleetctl_to=$(readlink {link} 2>/dev/null || true); \
         if [ \"$fleetctl_to\" != \"$fleetctl_was\" ]; then \
         mkdir -p {dir} && {{ {BOOT_ID}; printf '%s\\n' \"$fleetctl_was\"; }} > {tmp} && mv -f {tmp} {record}; \
         fi; printf '%s\\n' \"$fleetctl_now\"",
        dir = quote(DIR),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `script` with its absolute paths under a temp root.
    fn run(root: &std::path::Path, script: &str) -> (i32, String) {
        let r = root.to_str().unwrap();
        let script = script
            .replace("'/etc/", &format!("'{r}/etc/"))
            .replace("'/var/", &format!("'{r}/var/"));
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(script)
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    }

    #[test]
    fn a_moved_symlink_is_recorded_with_its_boot_and_previous_target_and_nothing_else_is() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let ext = root.join("etc/extensions");
        std::fs::create_dir_all(&ext).unwrap();
        let link = ext.join("containerd.raw");
        std::os::unix::fs::symlink(
            "../../opt/extensions/containerd/containerd-2.1.4-x86-64.raw",
            &link,
        )
        .unwrap();
        let l = link.to_str().unwrap();
        let moving = format!(
            "ln -sfn ../../opt/extensions/containerd/containerd-2.2.0-x86-64.raw {l}; readlink {l}"
        );
        let (code, out) = run(root, &recorded("containerd", &moving));
        assert_eq!(code, 0);
        assert_eq!(
            out,
            "../../opt/extensions/containerd/containerd-2.2.0-x86-64.raw\n"
        );
        let record =
            std::fs::read_to_string(root.join("var/lib/fleetctl/staged/containerd")).unwrap();
        let lines: Vec<&str> = record.lines().collect();
        let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
        assert_eq!(
            lines,
            [
                boot.trim(),
                "../../opt/extensions/containerd/containerd-2.1.4-x86-64.raw"
            ]
        );

        // Staged again, nothing moves: the record of the real change stays.
        std::fs::write(
            root.join("var/lib/fleetctl/staged/containerd"),
            "older\nx\n",
        )
        .unwrap();
        let (code, _) = run(root, &recorded("containerd", &format!("readlink {l}")));
        assert_eq!(code, 0);
        assert_eq!(
            std::fs::read_to_string(root.join("var/lib/fleetctl/staged/containerd")).unwrap(),
            "older\nx\n"
        );
        // A failed stage keeps its exit status and records nothing.
        let (code, _) = run(root, &recorded("kubernetes", "echo partial; exit 7"));
        assert_eq!(code, 7);
        assert!(!root.join("var/lib/fleetctl/staged/kubernetes").exists());
    }
}
