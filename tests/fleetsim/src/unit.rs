//! The piece of systemd node-init needs to run `kubelet.service` the way
//! systemd would: read the unit and its drop-ins from the merged `/usr`
//! (they come with the sysext, so a node without one has no such unit),
//! build the service's environment (`Environment=`, then each
//! `EnvironmentFile=` re-read at every start, `-` meaning optional), and
//! expand `ExecStart=` (`$VAR` splits into words, `${VAR}` stays one). The
//! unit's state, as `systemctl` reports it, lives in a small file under
//! `/run`, written by node-init and read by the emulated `systemctl`.

use std::fs;
use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

/// Where units from /usr live.
pub const UNIT_DIR: &str = "/usr/lib/systemd/system";
/// Where node-init keeps the state of the units it runs (fresh every boot).
pub const STATE_DIR: &str = "/run/fleetsim/units";

/// The parts of a service unit the sim uses, after its drop-ins.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Unit {
    pub name: String,
    pub description: String,
    pub documentation: Vec<String>,
    /// The unit file and its drop-ins, in the order they were applied.
    pub fragment: String,
    pub drop_ins: Vec<String>,
    /// The last `ExecStart=` (an empty one resets the list, as in systemd).
    pub exec_start: Option<String>,
    pub environment: Vec<(String, String)>,
    /// `(path, optional)`: a leading `-` makes a missing file fine.
    pub environment_files: Vec<(String, bool)>,
}

/// Loads `name` from `root` + [`UNIT_DIR`]; `None` when there is no such unit.
pub fn load(root: &Path, name: &str) -> Result<Option<Unit>> {
    let dir = root.join(UNIT_DIR.trim_start_matches('/'));
    let main = dir.join(name);
    let text = match fs::read_to_string(&main) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("reading {}", main.display())),
    };
    let mut unit = Unit {
        name: name.to_string(),
        fragment: format!("{UNIT_DIR}/{name}"),
        ..Unit::default()
    };
    apply(&mut unit, &text);
    let drop_in_dir = dir.join(format!("{name}.d"));
    let mut drop_ins: Vec<String> = fs::read_dir(&drop_in_dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".conf"))
                .collect()
        })
        .unwrap_or_default();
    drop_ins.sort();
    for d in drop_ins {
        let path = drop_in_dir.join(&d);
        let text =
            fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
        apply(&mut unit, &text);
        unit.drop_ins.push(d);
    }
    Ok(Some(unit))
}

/// Applies one unit file or drop-in on top of what was read so far.
pub fn apply(unit: &mut Unit, text: &str) {
    let mut section = String::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name.to_string();
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let value = value.trim();
        match (section.as_str(), key.trim()) {
            ("Unit", "Description") => unit.description = value.to_string(),
            ("Unit", "Documentation") => {
                unit.documentation
                    .extend(value.split_whitespace().map(str::to_string));
            }
            ("Service", "ExecStart") => {
                unit.exec_start = (!value.is_empty()).then(|| value.to_string());
            }
            ("Service", "Environment") => {
                for word in words(value) {
                    if let Some((k, v)) = word.split_once('=') {
                        unit.environment.push((k.to_string(), v.to_string()));
                    }
                }
            }
            ("Service", "EnvironmentFile") => match value.strip_prefix('-') {
                Some(path) => unit.environment_files.push((path.to_string(), true)),
                None => unit.environment_files.push((value.to_string(), false)),
            },
            _ => {}
        }
    }
}

/// Splits a unit-file value into words, honouring double and single quotes.
pub fn words(value: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote = None;
    let mut started = false;
    for c in value.chars() {
        match (quote, c) {
            (None, '"' | '\'') => {
                quote = Some(c);
                started = true;
            }
            (Some(q), c) if c == q => quote = None,
            (None, c) if c.is_whitespace() => {
                if started {
                    out.push(std::mem::take(&mut cur));
                    started = false;
                }
            }
            (_, c) => {
                cur.push(c);
                started = true;
            }
        }
    }
    if started {
        out.push(cur);
    }
    out
}

/// `KEY=value` lines of an environment file (`#` comments, quotes removed).
pub fn parse_env_file(text: &str) -> Vec<(String, String)> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with(';'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| {
            let v = v.trim();
            let unquoted = v
                .strip_prefix('"')
                .and_then(|x| x.strip_suffix('"'))
                .or_else(|| v.strip_prefix('\'').and_then(|x| x.strip_suffix('\'')))
                .unwrap_or(v);
            (k.trim().to_string(), unquoted.to_string())
        })
        .collect()
}

/// The service's environment for one start: `Environment=` first, then every
/// environment file in order, later assignments winning. A missing
/// non-optional file is the error systemd refuses the start with.
pub fn environment(unit: &Unit, root: &Path) -> Result<Vec<(String, String)>, String> {
    let mut env: Vec<(String, String)> = Vec::new();
    let mut set = |k: String, v: String| {
        env.retain(|(x, _)| *x != k);
        env.push((k, v));
    };
    for (k, v) in &unit.environment {
        set(k.clone(), v.clone());
    }
    for (path, optional) in &unit.environment_files {
        match fs::read_to_string(root.join(path.trim_start_matches('/'))) {
            Ok(text) => {
                for (k, v) in parse_env_file(&text) {
                    set(k, v);
                }
            }
            Err(_) if *optional => {}
            Err(e) => return Err(format!("Failed to load environment files: {path}: {e}")),
        }
    }
    Ok(env)
}

/// `ExecStart=` with the environment substituted: `$VAR` as a whole word
/// becomes the value's words (none if empty or unset), `${VAR}` one word.
pub fn command_line(exec_start: &str, env: &[(String, String)]) -> Vec<String> {
    let lookup = |name: &str| {
        env.iter()
            .rfind(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .unwrap_or("")
    };
    let mut argv = Vec::new();
    for word in words(exec_start) {
        if let Some(name) = word.strip_prefix("${").and_then(|w| w.strip_suffix('}')) {
            argv.push(lookup(name).to_string());
        } else if let Some(name) = word
            .strip_prefix('$')
            .filter(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        {
            argv.extend(lookup(name).split_whitespace().map(str::to_string));
        } else {
            argv.push(word);
        }
    }
    argv
}

/// Variables `exec_start` references that `env` does not set; systemd (since
/// v254) logs each as `Referenced but unset environment variable evaluates
/// to an empty string: NAME`.
pub fn unset_references(exec_start: &str, env: &[(String, String)]) -> Vec<String> {
    let mut out = Vec::new();
    for word in words(exec_start) {
        let name = word
            .strip_prefix("${")
            .and_then(|w| w.strip_suffix('}'))
            .or_else(|| word.strip_prefix('$'));
        if let Some(name) = name.filter(|n| !n.is_empty())
            && !env.iter().any(|(k, _)| k == name)
            && !out.iter().any(|o| o == name)
        {
            out.push(name.to_string());
        }
    }
    out
}

/// A unit's state as systemd would report it (`ActiveState`, `SubState`…).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UnitState {
    /// `active`, `activating` (waiting to restart) or `failed`.
    pub active: String,
    /// `running`, `auto-restart`, `failed`.
    pub sub: String,
    /// When the unit entered this state.
    pub since: f64,
    /// The main process, running or last exited.
    pub main_pid: i32,
    /// The command line systemd shows for it.
    pub command: Vec<String>,
    /// `status=1/FAILURE` and the like, once the main process has exited.
    pub exit: Option<String>,
    /// `exit-code` and the like, once it failed.
    pub result: Option<String>,
    pub restarts: u32,
    /// A transient unit's `--description` (`systemd-run`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// The state file of `unit` under `root`.
pub fn state_path(root: &Path, unit: &str) -> std::path::PathBuf {
    root.join(STATE_DIR.trim_start_matches('/'))
        .join(format!("{unit}.json"))
}

pub fn read_state(root: &Path, unit: &str) -> Result<Option<UnitState>> {
    let path = state_path(root, unit);
    match fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .with_context(|| format!("parsing {}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

/// Replaces the state file by rename, so `systemctl` never reads half of it.
pub fn write_state(root: &Path, unit: &str, state: &UnitState) -> Result<()> {
    let path = state_path(root, unit);
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let tmp = path.with_extension("json.tmp");
    fs::write(&tmp, serde_json::to_vec_pretty(state)?)
        .with_context(|| format!("writing {}", tmp.display()))?;
    fs::rename(&tmp, &path).with_context(|| format!("replacing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kubelet_unit() -> Unit {
        let mut u = Unit::default();
        for e in crate::image::tree(&crate::version::Version::parse("v1.35.3").unwrap()) {
            if e.path.ends_with("kubelet.service") || e.path.ends_with("10-kubeadm.conf") {
                apply(&mut u, &e.content);
            }
        }
        u
    }

    #[test]
    fn the_drop_in_resets_exec_start_and_brings_the_environment() {
        let u = kubelet_unit();
        assert_eq!(u.description, "kubelet: The Kubernetes Node Agent");
        assert_eq!(
            u.exec_start.as_deref(),
            Some(
                "/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS"
            )
        );
        assert_eq!(
            u.environment_files,
            [
                ("/var/lib/kubelet/kubeadm-flags.env".to_string(), true),
                ("/etc/sysconfig/kubelet".to_string(), true)
            ]
        );
        assert_eq!(u.environment[1].0, "KUBELET_CONFIG_ARGS");
    }

    #[test]
    fn the_command_line_comes_from_the_flags_file() {
        let root = tempfile::tempdir().unwrap();
        let u = kubelet_unit();
        let flags = root.path().join("var/lib/kubelet/kubeadm-flags.env");
        fs::create_dir_all(flags.parent().unwrap()).unwrap();
        fs::write(
            &flags,
            "KUBELET_KUBEADM_ARGS=\"--container-runtime-endpoint=unix:///run/containerd/containerd.sock --pod-infra-container-image=registry.k8s.io/pause:3.10\"\n",
        )
        .unwrap();
        let env = environment(&u, root.path()).unwrap();
        let argv = command_line(u.exec_start.as_deref().unwrap(), &env);
        assert_eq!(
            argv,
            [
                "/usr/bin/kubelet",
                "--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf",
                "--kubeconfig=/etc/kubernetes/kubelet.conf",
                "--config=/var/lib/kubelet/config.yaml",
                "--container-runtime-endpoint=unix:///run/containerd/containerd.sock",
                "--pod-infra-container-image=registry.k8s.io/pause:3.10",
            ]
        );
        // Re-read at every start: the fixed file gives another command line.
        fs::write(&flags, "KUBELET_KUBEADM_ARGS=\"--container-runtime-endpoint=unix:///run/containerd/containerd.sock\"\n").unwrap();
        let env = environment(&u, root.path()).unwrap();
        assert_eq!(
            command_line(u.exec_start.as_deref().unwrap(), &env).len(),
            5
        );
    }

    #[test]
    fn a_missing_mandatory_environment_file_fails_the_start() {
        let mut u = Unit::default();
        apply(
            &mut u,
            "[Service]\nEnvironmentFile=/etc/nope\nExecStart=/bin/true\n",
        );
        let root = tempfile::tempdir().unwrap();
        let err = environment(&u, root.path()).unwrap_err();
        assert!(
            err.starts_with("Failed to load environment files: /etc/nope: "),
            "{err}"
        );
    }

    #[test]
    fn unset_variables_are_named() {
        let env = vec![("A".to_string(), "1".to_string())];
        assert_eq!(unset_references("/bin/x $A $B ${C} $B", &env), ["B", "C"]);
    }

    #[test]
    fn words_and_braced_variables() {
        assert_eq!(words(r#""A=b c" D=e 'f g'"#), ["A=b c", "D=e", "f g"]);
        let env = vec![("X".to_string(), "1 2".to_string())];
        assert_eq!(
            command_line("/bin/x $X ${X} $MISSING", &env),
            ["/bin/x", "1", "2", "1 2"]
        );
    }
}
