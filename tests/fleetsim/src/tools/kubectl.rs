//! The node's `kubectl` is the real one: the machine image's kubectl whose
//! minor is closest to the sysext image's (`crate::clients`), run with the
//! caller's arguments, stdin and stdout, against the sim's API server
//! (`crate::api`). Its output, messages and exit codes are kubectl's own.
//!
//! What the sim adds is the event log: a mutating call (cordon, drain,
//! annotate, patch, exec, …) is recorded with its result once kubectl has
//! exited, so the tests' invariants (drained before a reboot, uncordoned
//! after) judge what kubectl really did. stderr is passed through as it
//! comes and its first 64 KiB kept for that record. kubectl's own exit code
//! is not the whole truth: `kubectl cordon` exits 0 when the API refuses
//! its PATCH and prints `error: unable to cordon node …`
//! (kubectl/pkg/cmd/drain/drain.go, RunCordonOrUncordon), so such a line
//! makes the record a failure too.

use std::io::Read;
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

use crate::clients;
use crate::tools::Env;

const NAME: &str = "kubectl";

/// How much of kubectl's stderr the event record may quote from.
const KEEP: usize = 64 * 1024;

/// Flags of kubectl's that take the next word as their value (when not
/// written `--flag=value`), so the verb is not mistaken for one.
const VALUE_FLAGS: &[&str] = &[
    "-n",
    "--namespace",
    "--kubeconfig",
    "--request-timeout",
    "-s",
    "--server",
    "--context",
    "--cluster",
    "--user",
    "-o",
    "--output",
    "-v",
];

/// Verbs that change the cluster (or, for exec, run something in it).
const MUTATING: &[&str] = &[
    "cordon", "uncordon", "drain", "annotate", "label", "taint", "create", "delete", "patch",
    "apply", "replace", "edit", "scale", "exec", "rollout",
];

pub fn run(env: &mut Env, args: &[String]) -> Result<i32> {
    let version = env.binary_version(NAME)?;
    let dir = env.path(clients::NODE_DIR);
    let available = clients::listed(&dir);
    let Some(binary) = clients::closest(version.minor as u32, &available) else {
        bail!(
            "no real kubectl in {} on this node (the fleet links the machine image's \
             kubectl.1.NN there at provisioning)",
            dir.display()
        );
    };
    let _ = env.out.flush();
    let mut command = Command::new(binary);
    // The runtime settings for a short-lived Go client, unless the caller
    // chose its own.
    for (key, value) in clients::GO_RUNTIME {
        if std::env::var_os(key).is_none() {
            command.env(key, value);
        }
    }
    let mut child = command
        .args(args)
        .stdin(Stdio::inherit())
        .stdout(Stdio::inherit())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {}", binary.display()))?;
    let mut kept = Vec::new();
    if let Some(mut stderr) = child.stderr.take() {
        let mut buf = [0u8; 8192];
        loop {
            let n = match stderr.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let _ = env.err.write_all(&buf[..n]);
            let _ = env.err.flush();
            let room = KEEP.saturating_sub(kept.len());
            kept.extend_from_slice(&buf[..n.min(room)]);
        }
    }
    let status = child
        .wait()
        .with_context(|| format!("waiting for {}", binary.display()))?;
    let code = status.code().unwrap_or_else(|| {
        use std::os::unix::process::ExitStatusExt;
        128 + status.signal().unwrap_or(0)
    });
    if verb(args).is_some_and(|v| MUTATING.contains(&v)) {
        env.record(NAME, args, &result(code, &String::from_utf8_lossy(&kept)));
    }
    Ok(code)
}

/// kubectl's verb: the first word that is neither a flag nor a flag's value.
fn verb(args: &[String]) -> Option<&str> {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--" {
            return None;
        }
        if VALUE_FLAGS.contains(&a.as_str()) {
            it.next();
        } else if !a.starts_with('-') {
            return Some(a);
        }
    }
    None
}

/// The event's result: `ok`, or the line that says why not.
fn result(code: i32, stderr: &str) -> String {
    let errors = |l: &&str| l.starts_with("error") || l.starts_with("Error from server");
    if code == 0 {
        return match stderr.lines().find(|l| l.starts_with("error: ")) {
            Some(line) => line.to_string(),
            None => "ok".to_string(),
        };
    }
    stderr
        .lines()
        .find(errors)
        .or_else(|| stderr.lines().find(|l| !l.trim().is_empty()))
        .map_or_else(|| format!("exit code {code}"), str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn the_verb_skips_flags_and_their_values() {
        let v = |s: &str| verb(&words(s)).map(String::from);
        assert_eq!(
            v("--kubeconfig /etc/kubernetes/admin.conf -n kube-system annotate ds kured x=y"),
            Some("annotate".into())
        );
        assert_eq!(
            v("--kubeconfig=/a --request-timeout=20s drain w-1"),
            Some("drain".into())
        );
        assert_eq!(v("-o json get nodes"), Some("get".into()));
        assert_eq!(v("--help"), None);
        assert_eq!(v("-- cordon"), None);
    }

    #[test]
    fn a_refused_cordon_that_exits_0_is_recorded_as_its_error() {
        assert_eq!(result(0, ""), "ok");
        assert_eq!(
            result(
                0,
                "Warning: ignoring DaemonSet-managed Pods: kube-system/cilium-x\n"
            ),
            "ok"
        );
        assert_eq!(
            result(
                0,
                "error when evicting pods/\"app\" -n \"default\" (will retry after 5s): Cannot evict\n"
            ),
            "ok",
            "a drain that retried and then succeeded"
        );
        assert_eq!(
            result(
                0,
                "error: unable to cordon node \"w-2\": nodes \"w-2\" is forbidden\n"
            ),
            "error: unable to cordon node \"w-2\": nodes \"w-2\" is forbidden"
        );
    }

    #[test]
    fn a_failure_is_recorded_by_its_first_error_line() {
        assert_eq!(
            result(
                1,
                "I1202 klog noise\nError from server (Conflict): Operation cannot be fulfilled\n"
            ),
            "Error from server (Conflict): Operation cannot be fulfilled"
        );
        assert_eq!(result(1, "\nsomething odd\n"), "something odd");
        assert_eq!(result(137, ""), "exit code 137");
    }
}
