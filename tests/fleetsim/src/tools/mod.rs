//! The node's emulated tools: one multi-call binary answers as
//! `systemd-sysupdate`, `systemctl`, `journalctl`, `update_engine_client`,
//! `kubelet`, `kubeadm`, `systemd-sysext` and `systemd-run`, chosen by
//! argv[0]. As `kubectl` it runs the real kubectl (`kubectl.rs`) and only
//! records its mutating calls.
//!
//! fleetctl runs unmodified commands over SSH, so every tool here prints what
//! the real one prints (stdout vs stderr, exit codes, error wording) for the
//! invocations fleetctl and an operator use, and refuses anything else loudly
//! with `fleetsim: unsupported: <argv>` instead of guessing. Every mutating
//! call is appended to the shared event log so tests can assert on order.
//!
//! Every absolute path goes through [`Env::path`], rooted at `FLEETSIM_ROOT`
//! (default `/`), so unit tests run in a temp dir without namespaces.

use std::fs;
use std::io::{self, BufRead, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::state::{self, Event, NodeBoot, Shared};
use util::KubeVersion;

mod containerd;
mod http;
mod journalctl;
mod kubeadm;
mod kubectl;
pub(crate) mod kubelet;
mod sysext;
mod systemctl;
mod systemd_run;
mod sysupdate;
#[cfg(test)]
pub(crate) mod testutil;
mod update_engine;
pub(crate) mod util;

/// The environment variable that moves every absolute path under a prefix.
pub const ROOT_ENV: &str = "FLEETSIM_ROOT";
/// Written by the scenario when a Flatcar update is staged (absent = none).
pub const OS_UPDATE_FILE: &str = "/var/lib/fleetsim/os-update.json";

/// Writes a line to the tool's stdout. A closed pipe (`| head`) must not turn
/// into a panic or a different exit code, so write errors are ignored here:
/// the exit code already carries the result.
macro_rules! say {
    ($env:expr, $($arg:tt)*) => {{
        let _ = ::std::io::Write::write_fmt(
            &mut *$env.out,
            format_args!("{}\n", format_args!($($arg)*)),
        );
    }};
}

/// Writes a line to the tool's stderr; errors ignored for the same reason as [`say!`].
macro_rules! complain {
    ($env:expr, $($arg:tt)*) => {{
        let _ = ::std::io::Write::write_fmt(
            &mut *$env.err,
            format_args!("{}\n", format_args!($($arg)*)),
        );
    }};
}

/// An IntOrString of the API (`2`, `"50%"`): `(value, is_percent)`.
pub fn int_or_percent(v: &serde_json::Value) -> Option<(i64, bool)> {
    match v {
        serde_json::Value::Number(n) => n.as_i64().filter(|n| *n >= 0).map(|n| (n, false)),
        // The API accepts a string only as a percentage.
        serde_json::Value::String(s) => s
            .strip_suffix('%')?
            .parse()
            .ok()
            .filter(|p: &i64| *p >= 0)
            .map(|p| (p, true)),
        _ => None,
    }
}

/// The unit manager `systemd-run` leaves behind (main.rs runs it by argv[0]).
pub use systemd_run::{MANAGER as UNIT_MANAGER, manage as unit_manager};
pub(crate) use util::civil;
pub(crate) use util::vercmp;
pub(crate) use {complain, say};

/// The tools this binary can be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tool {
    Sysupdate,
    Systemctl,
    UpdateEngineClient,
    Kubelet,
    Kubeadm,
    Kubectl,
    Sysext,
    Journalctl,
    SystemdRun,
    Containerd,
}

impl Tool {
    fn from_name(name: &str) -> Option<Tool> {
        Some(match name {
            "systemd-sysupdate" => Tool::Sysupdate,
            "systemctl" => Tool::Systemctl,
            "update_engine_client" => Tool::UpdateEngineClient,
            "kubelet" => Tool::Kubelet,
            "kubeadm" => Tool::Kubeadm,
            "kubectl" => Tool::Kubectl,
            "systemd-sysext" => Tool::Sysext,
            "journalctl" => Tool::Journalctl,
            "systemd-run" => Tool::SystemdRun,
            "containerd" => Tool::Containerd,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Tool::Sysupdate => "systemd-sysupdate",
            Tool::Systemctl => "systemctl",
            Tool::UpdateEngineClient => "update_engine_client",
            Tool::Kubelet => "kubelet",
            Tool::Kubeadm => "kubeadm",
            Tool::Kubectl => "kubectl",
            Tool::Sysext => "systemd-sysext",
            Tool::Journalctl => "journalctl",
            Tool::SystemdRun => "systemd-run",
            Tool::Containerd => "containerd",
        }
    }
}

/// Runs the tool `name` (argv[0]'s basename) with `args`, on the real
/// stdin/stdout/stderr and the root from `FLEETSIM_ROOT`. Returns the exit
/// code, or `None` when `name` is not one of the emulated tools.
pub fn dispatch(name: &str, args: &[String]) -> Option<i32> {
    let tool = Tool::from_name(name)?;
    let root = std::env::var_os(ROOT_ENV)
        .filter(|r| !r.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/"));
    let stdin = io::stdin();
    let mut input = stdin.lock();
    let mut out = io::stdout();
    let mut err = io::stderr();
    let mut env = Env {
        root,
        input: &mut input,
        out: &mut out,
        err: &mut err,
        utf8: locale_is_utf8(),
        tool_version: std::env::var(crate::image::TOOL_VERSION_ENV)
            .ok()
            .filter(|v| !v.is_empty()),
        unit: std::env::var(kubelet::UNIT_ENV).ok(),
        daemon: true,
    };
    let code = run(&mut env, tool, args);
    let _ = env.out.flush();
    let _ = env.err.flush();
    Some(code)
}

/// systemd tools draw glyphs only under a UTF-8 locale; a non-interactive
/// `ssh node cmd` usually has none, and then they fall back to ASCII.
fn locale_is_utf8() -> bool {
    ["LC_ALL", "LC_CTYPE", "LANG"]
        .iter()
        .filter_map(|k| std::env::var(k).ok())
        .find(|v| !v.is_empty())
        .is_some_and(|v| {
            let v = v.to_ascii_lowercase();
            v.contains("utf-8") || v.contains("utf8")
        })
}

fn run(env: &mut Env, tool: Tool, args: &[String]) -> i32 {
    let result = match tool {
        Tool::Sysupdate => sysupdate::run(env, args),
        Tool::Systemctl => systemctl::run(env, args),
        Tool::UpdateEngineClient => update_engine::run(env, args),
        Tool::Kubelet => kubelet::run(env, args),
        Tool::Kubeadm => kubeadm::run(env, args),
        Tool::Kubectl => kubectl::run(env, args),
        Tool::Sysext => sysext::run(env, args),
        Tool::Journalctl => journalctl::run(env, args),
        Tool::SystemdRun => systemd_run::run(env, args),
        Tool::Containerd => containerd::run(env, args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            // An internal failure of the simulator (unreadable state, broken
            // node files): say so plainly, and log it, since the test driving
            // fleetctl will want to know why the node misbehaved.
            let msg = format!("fleetsim: {}: {e:#}", tool.name());
            complain!(env, "{msg}");
            env.record(tool.name(), args, &msg);
            1
        }
    }
}

/// Where a tool runs: its root prefix and its standard streams. Tests build
/// one over a temp dir and in-memory buffers.
pub(crate) struct Env<'a> {
    pub root: PathBuf,
    pub input: &'a mut dyn BufRead,
    pub out: &'a mut dyn Write,
    pub err: &'a mut dyn Write,
    /// Whether systemd-style glyphs may be drawn in UTF-8.
    pub utf8: bool,
    /// The version of the kubelet/kubeadm/kubectl binary being run: set by
    /// the sysext image's wrapper (`crate::image`), absent otherwise.
    pub tool_version: Option<String>,
    /// The systemd unit this process runs as (node-init says so).
    pub unit: Option<String>,
    /// A daemon that started may keep running (unit tests only want to
    /// know how its start went).
    pub daemon: bool,
}

impl Env<'_> {
    /// The real location of the node path `abs` (an absolute path as seen inside the node).
    pub fn path(&self, abs: &str) -> PathBuf {
        self.root.join(abs.trim_start_matches('/'))
    }

    /// The shared cluster directory as seen from here.
    pub fn shared(&self) -> Shared {
        Shared::new(self.path(state::CLUSTER_DIR))
    }

    /// This node's boot record, written by the supervisor before the boot.
    pub fn boot(&self) -> Result<NodeBoot> {
        let path = self.path(state::NODE_FILE);
        let bytes = fs::read(&path).with_context(|| {
            format!(
                "reading this node's boot record {} (is this running inside a fleetsim node?)",
                path.display()
            )
        })?;
        serde_json::from_slice(&bytes)
            .with_context(|| format!("parsing this node's boot record {}", path.display()))
    }

    /// The version of this kubelet, kubeadm or kubectl binary: the image it
    /// came from, not what the node booted (a staged image's kubeadm,
    /// mounted by hand, is the new one).
    pub fn binary_version(&self, tool: &str) -> Result<KubeVersion> {
        let Some(text) = &self.tool_version else {
            anyhow::bail!(
                "this is fleetsim's internal {tool}; run the one a kubernetes sysext image \
                 provides (/usr/bin/{tool}), whose wrapper sets {}",
                crate::image::TOOL_VERSION_ENV
            );
        };
        KubeVersion::parse(text).with_context(|| {
            format!(
                "{} is not a Kubernetes version: {text:?}",
                crate::image::TOOL_VERSION_ENV
            )
        })
    }

    /// This node's name: from the boot record, else the kernel hostname.
    pub fn node_name(&self) -> String {
        if let Ok(boot) = self.boot() {
            return boot.name;
        }
        fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| "unknown".to_string())
    }

    /// Appends one event for a mutating call. The log is test evidence, not
    /// the tool's output, so failing to write it is a warning, not a failure
    /// of the command the user ran.
    pub fn record(&mut self, argv0: &str, args: &[String], result: &str) {
        let mut argv = vec![argv0.to_string()];
        argv.extend(args.iter().cloned());
        let event = Event {
            t: state::now(),
            node: self.node_name(),
            argv,
            result: result.to_string(),
            pins: self.pins(),
            version: self.tool_version.clone(),
            ..Default::default()
        };
        let shared = self.shared();
        if let Err(e) = shared.record(&event) {
            complain!(
                self,
                "fleetsim: warning: could not append to the event log in {}: {e:#}",
                shared.dir.display()
            );
        }
    }

    /// The `[Source] MatchPattern=` values in /etc/sysupdate.kubernetes.d/*.conf right now.
    pub fn pins(&self) -> Vec<String> {
        let dir = self.path("/etc/sysupdate.kubernetes.d");
        let mut pins = Vec::new();
        for file in conf_files(&dir) {
            if let Ok(text) = fs::read_to_string(&file) {
                pins.extend(source_patterns(&text));
            }
        }
        pins
    }

    /// Refuses an invocation the emulation does not know, loudly and on the record.
    pub fn unsupported(&mut self, argv0: &str, args: &[String]) -> i32 {
        let mut argv = vec![argv0.to_string()];
        argv.extend(args.iter().cloned());
        let msg = format!("fleetsim: unsupported: {}", util::shell_join(&argv));
        complain!(self, "{msg}");
        self.record(argv0, args, &msg);
        1
    }
}

/// The `*.conf` files of a directory in name order (empty if it does not exist).
pub(crate) fn conf_files(dir: &Path) -> Vec<PathBuf> {
    files_with_suffix(dir, "conf")
}

/// The `*.<ext>` files of a directory in name order (empty if it does not exist).
pub(crate) fn files_with_suffix(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = match fs::read_dir(dir) {
        Ok(entries) => entries
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == ext) && p.is_file())
            .collect(),
        Err(_) => Vec::new(),
    };
    files.sort();
    files
}

/// The raw MatchPattern words of the `[Source]` section of a sysupdate config.
fn source_patterns(text: &str) -> Vec<String> {
    let mut section = String::new();
    let mut patterns = Vec::new();
    for line in text.lines().map(str::trim) {
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name.trim().to_string();
        } else if section == "Source"
            && let Some((key, value)) = line.split_once('=')
            && key.trim() == "MatchPattern"
        {
            patterns.extend(value.split_whitespace().map(str::to_string));
        }
    }
    patterns
}

#[cfg(test)]
mod tests {
    use super::testutil::Node;
    use super::*;

    #[test]
    fn unknown_names_are_not_ours() {
        assert_eq!(dispatch("bash", &[]), None);
        assert_eq!(dispatch("reboot", &[]), None);
    }

    #[test]
    fn unsupported_invocations_fail_and_are_recorded_with_pins() {
        let node = Node::worker("w1", "v1.34.2");
        node.write(
            "/etc/sysupdate.kubernetes.d/kubernetes.conf",
            "[Source]\nType=url-file\nPath=http://127.0.0.1:1/\nMatchPattern=kubernetes-v1.34.@v-%a.raw\n",
        );
        let r = node.run("systemctl", &["mask", "locksmithd"]);
        assert_eq!(r.code, 1);
        assert_eq!(
            r.stderr.trim(),
            "fleetsim: unsupported: systemctl mask locksmithd"
        );
        let events = node.events();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].node, "w1");
        assert_eq!(events[0].argv, ["systemctl", "mask", "locksmithd"]);
        assert_eq!(
            events[0].result,
            "fleetsim: unsupported: systemctl mask locksmithd"
        );
        assert_eq!(events[0].pins, ["kubernetes-v1.34.@v-%a.raw"]);
    }

    #[test]
    fn pins_come_only_from_source_sections() {
        let text = "[Transfer]\nVerify=false\n[Source]\nMatchPattern=a-@v.raw b-@v.raw\n\
                    MatchPattern=c-@v.raw\n[Target]\nMatchPattern=t-@v.raw\n";
        assert_eq!(source_patterns(text), ["a-@v.raw", "b-@v.raw", "c-@v.raw"]);
    }
}
