//! A small in-memory API server that answers the kubectl calls the lock
//! makes as kubectl and the real one do — the jsonpath reads in the shapes
//! `remote::kubectl` documents, resourceVersion and uid preconditions,
//! NotFound / AlreadyExists / Conflict in kubectl's wording — with hooks
//! that play a concurrent writer; and the helpers the lock's tests share.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::SystemTime;

use super::{Holder, Identity, Kubectl, LockHeld, LockOptions};
use crate::remote::kubectl as k;
use crate::ssh::Output;

mod printed;
use printed::{
    annotate, conflict, container_fields, delete_raw, listing_marker, not_found, settings_line,
};

pub(crate) const NOW: &str = "2026-11-29T19:30:12Z";

pub(crate) fn at(rfc: &str) -> SystemTime {
    humantime::parse_rfc3339(rfc).unwrap()
}

pub(crate) fn me() -> Identity {
    Identity {
        user: "alice".into(),
        host: "laptop".into(),
        pid: 4242,
        process: Some("b00t/4242000".into()),
    }
}

pub(crate) fn bob() -> Identity {
    Identity {
        user: "bob".into(),
        host: "ops-1".into(),
        pid: 77,
        process: None,
    }
}

pub(crate) fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// A Kured node's entry as Kured writes it.
pub(crate) fn kured_node(id: &str, since: &str) -> Holder {
    Holder {
        id: id.into(),
        started: Some(since.into()),
        ..Holder::default()
    }
}

/// A fleetctl holder with a heartbeat.
pub(crate) fn fleetctl(id: &str, started: &str, heartbeat: &str) -> Holder {
    Holder {
        id: id.into(),
        host: Some("ops-1".into()),
        pid: Some("77".into()),
        started: Some(started.into()),
        heartbeat: Some(heartbeat.into()),
        ..Holder::default()
    }
}

pub(crate) fn force() -> LockOptions {
    LockOptions {
        force_unlock: true,
        ..LockOptions::default()
    }
}

pub(crate) fn force_yes() -> LockOptions {
    LockOptions {
        force_unlock: true,
        force_yes: true,
        ..LockOptions::default()
    }
}

pub(crate) fn held(err: &anyhow::Error) -> &LockHeld {
    err.downcast_ref::<LockHeld>()
        .unwrap_or_else(|| panic!("not LockHeld: {err:#}"))
}

// ---------------------------------------------------------------------------
// The fake API server

/// A container of a pod template.
#[derive(Debug, Clone, Default)]
pub(crate) struct Container {
    pub(crate) name: String,
    pub(crate) image: String,
    pub(crate) command: Vec<String>,
    pub(crate) args: Vec<String>,
    /// `None`: set from a reference (`valueFrom`).
    pub(crate) env: Vec<(String, Option<String>)>,
    pub(crate) env_from: bool,
    /// `securityContext.privileged`.
    pub(crate) privileged: bool,
}

impl Container {
    /// Kured as its manifest and Helm chart run it.
    pub(crate) fn kured(args: &[&str]) -> Container {
        Container {
            name: "kured".into(),
            image: "ghcr.io/kubereboot/kured:1.23.0".into(),
            command: strings(&["/usr/bin/kured"]),
            args: strings(args),
            env: vec![("KURED_NODE_ID".into(), None)],
            env_from: false,
            privileged: true,
        }
    }

    pub(crate) fn other(name: &str, image: &str) -> Container {
        Container {
            name: name.into(),
            image: image.into(),
            ..Container::default()
        }
    }
}

#[derive(Debug, Clone, Default)]
pub(crate) struct Ds {
    /// `hostPID` of the pod template (set by [`Api::add_ds`] when a
    /// container runs Kured, as its manifest does).
    pub(crate) host_pid: bool,
    pub(crate) rv: u64,
    pub(crate) annotations: BTreeMap<String, String>,
    pub(crate) containers: Vec<Container>,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct Cm {
    pub(crate) rv: u64,
    pub(crate) uid: String,
    pub(crate) data: BTreeMap<String, String>,
}

#[derive(Debug, Default)]
pub(crate) struct State {
    pub(crate) next_rv: u64,
    pub(crate) daemonsets: BTreeMap<(String, String), Ds>,
    /// Pods that no DaemonSet here accounts for (a Deployment's, static).
    pub(crate) pods: Vec<(String, String, Vec<Container>)>,
    pub(crate) configmaps: BTreeMap<(String, String), Cm>,
}

impl State {
    pub(crate) fn bump(&mut self) -> u64 {
        self.next_rv += 1;
        self.next_rv
    }

    pub(crate) fn ds(&mut self, ns: &str, name: &str) -> &mut Ds {
        self.daemonsets.get_mut(&(ns.into(), name.into())).unwrap()
    }

    /// Kured (or anyone) writing an annotation, through the API.
    pub(crate) fn annotate(&mut self, ns: &str, name: &str, key: &str, value: &str) {
        let rv = self.bump();
        let ds = self.ds(ns, name);
        ds.annotations.insert(key.into(), value.into());
        ds.rv = rv;
    }

    /// A status update: only the resourceVersion moves.
    pub(crate) fn touch(&mut self, ns: &str, name: &str) {
        let rv = self.bump();
        self.ds(ns, name).rv = rv;
    }

    pub(crate) fn annotation(&self, ns: &str, name: &str, key: &str) -> Option<String> {
        self.daemonsets[&(ns.to_string(), name.to_string())]
            .annotations
            .get(key)
            .cloned()
    }

    pub(crate) fn lock_configmap(&self) -> Option<&Cm> {
        self.configmaps
            .get(&(k::LOCK_NAMESPACE.into(), k::LOCK_CONFIGMAP.into()))
    }

    pub(crate) fn lock_configmap_mut(&mut self) -> Option<&mut Cm> {
        self.configmaps
            .get_mut(&(k::LOCK_NAMESPACE.into(), k::LOCK_CONFIGMAP.into()))
    }

    /// Someone writing the lock configmap's data, through the API.
    pub(crate) fn set_lock_data(&mut self, key: &str, value: &str) {
        let rv = self.bump();
        let cm = self.lock_configmap_mut().unwrap();
        cm.data.insert(key.into(), value.into());
        cm.rv = rv;
    }
}

pub(crate) type Hook = Box<dyn FnOnce(&mut State) + Send>;

/// Answers the kubectl calls the lock makes and records every call, its
/// stdin and every journal note.
#[derive(Default)]
pub(crate) struct Api {
    pub(crate) state: Mutex<State>,
    pub(crate) calls: Mutex<Vec<(Vec<String>, Option<String>)>>,
    pub(crate) notes: Mutex<Vec<(String, String)>>,
    /// One runs just before each write reaches the "server": a concurrent writer.
    pub(crate) before_write: Mutex<Vec<Hook>>,
    /// One runs just after each write: someone acting right behind us.
    pub(crate) after_write: Mutex<Vec<Hook>>,
}

pub(crate) fn ok(stdout: impl Into<String>) -> Output {
    Output {
        exit: Some(0),
        signal: None,
        stdout: stdout.into(),
        stderr: String::new(),
    }
}

pub(crate) fn fail(stderr: impl Into<String>) -> Output {
    Output {
        exit: Some(1),
        signal: None,
        stdout: String::new(),
        stderr: format!("{}\n", stderr.into()),
    }
}

impl Api {
    /// Kured in kube-system as its manifest installs it.
    pub(crate) fn with_kured(args: &[&str]) -> Api {
        let api = Api::default();
        api.add_ds("kube-system", "kured", vec![Container::kured(args)]);
        api
    }

    pub(crate) fn add_ds(&self, ns: &str, name: &str, containers: Vec<Container>) {
        let mut state = self.state.lock().unwrap();
        let rv = state.bump();
        state.daemonsets.insert(
            (ns.into(), name.into()),
            Ds {
                host_pid: containers.iter().any(|c| c.privileged),
                rv,
                annotations: BTreeMap::new(),
                containers,
            },
        );
    }

    pub(crate) fn before_next_write(&self, hook: impl FnOnce(&mut State) + Send + 'static) {
        self.before_write.lock().unwrap().push(Box::new(hook));
    }

    pub(crate) fn after_next_write(&self, hook: impl FnOnce(&mut State) + Send + 'static) {
        self.after_write.lock().unwrap().push(Box::new(hook));
    }

    /// Runs the first queued hook, if any.
    fn run_hook(&self, queue: &Mutex<Vec<Hook>>) {
        let hook = {
            let mut queue = queue.lock().unwrap();
            (!queue.is_empty()).then(|| queue.remove(0))
        };
        if let Some(hook) = hook {
            hook(&mut self.state());
        }
    }

    pub(crate) fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap()
    }

    /// "get daemonsets", "annotate daemonset", "delete --raw", … per call.
    pub(crate) fn verbs(&self) -> Vec<String> {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .map(|(args, _)| {
                let rest = if args[0] == "-n" {
                    &args[2..]
                } else {
                    &args[..]
                };
                format!("{} {}", rest[0], rest[1])
            })
            .collect()
    }

    /// The calls whose verb is `verb` ("annotate daemonset", …).
    pub(crate) fn calls_of(&self, verb: &str) -> Vec<(Vec<String>, Option<String>)> {
        let verbs = self.verbs();
        let calls = self.calls.lock().unwrap().clone();
        verbs
            .iter()
            .zip(calls)
            .filter(|(v, _)| *v == verb)
            .map(|(_, c)| c)
            .collect()
    }

    pub(crate) fn notes(&self) -> Vec<String> {
        self.notes
            .lock()
            .unwrap()
            .iter()
            .map(|(k, _)| k.clone())
            .collect()
    }

    pub(crate) fn note_detail(&self, kind: &str) -> String {
        self.notes
            .lock()
            .unwrap()
            .iter()
            .find(|(k, _)| k == kind)
            .map(|(_, d)| d.clone())
            .unwrap_or_else(|| panic!("no {kind} note"))
    }

    fn answer(&self, args: &[String], stdin: Option<&str>) -> Output {
        let is_write = args
            .iter()
            .any(|a| matches!(a.as_str(), "annotate" | "create" | "patch" | "delete"));
        if is_write {
            self.run_hook(&self.before_write);
        }
        let out = self.serve(args, stdin);
        if is_write {
            self.run_hook(&self.after_write);
        }
        out
    }

    fn serve(&self, args: &[String], stdin: Option<&str>) -> Output {
        let mut state = self.state();
        if let Some(m) = listing_marker(args, stdin)
            && stdin == Some(k::list_daemonsets(&m).template.as_str())
            && args == k::list_daemonsets(&m).args.as_slice()
        {
            let mut text = String::new();
            for ((ns, name), ds) in &state.daemonsets {
                let pid = if ds.host_pid { "true" } else { "" };
                text.push_str(&format!("{m}daemonset{m}{ns}{m}{name}{m}{pid}"));
                for c in &ds.containers {
                    text.push_str(&container_fields(&m, c));
                }
            }
            return ok(text);
        }
        if let Some(m) = listing_marker(args, stdin)
            && stdin == Some(k::list_pods(&m).template.as_str())
            && args == k::list_pods(&m).args.as_slice()
        {
            let mut text = String::new();
            // Every DaemonSet runs a pod per node; one is enough here.
            let from_ds = state.daemonsets.iter().map(|((ns, name), ds)| {
                let pid = if ds.host_pid { "true" } else { "" };
                (
                    ns.clone(),
                    format!("{name}-x7k2p{m}{pid}{m}DaemonSet"),
                    ds.containers.clone(),
                )
            });
            // A bare pod shares its node's PID namespace when it has a
            // privileged container (as Kured's manifest pairs them).
            let bare = state.pods.iter().map(|(ns, name, containers)| {
                let pid = if containers.iter().any(|c| c.privileged) {
                    "true"
                } else {
                    ""
                };
                (ns.clone(), format!("{name}{m}{pid}{m}"), containers.clone())
            });
            for (ns, name, containers) in from_ds.chain(bare) {
                text.push_str(&format!("{m}pod{m}{ns}{m}{name}"));
                for c in &containers {
                    text.push_str(&container_fields(&m, c));
                }
            }
            return ok(text);
        }
        if args.len() == 5 && args[0] == "delete" && args[1] == "--raw" {
            return delete_raw(&mut state, &args[2], stdin.expect("a DELETE body on stdin"));
        }
        let [dash_n, ns, verb, kind, name, rest @ ..] = args else {
            panic!("unexpected kubectl call {args:?}")
        };
        assert_eq!(dash_n, "-n");
        let key = (ns.clone(), name.clone());
        match (verb.as_str(), kind.as_str()) {
            ("get", "daemonset")
                if rest[1].starts_with("jsonpath={.spec.template.spec.containers[") =>
            {
                let index = rest[1]["jsonpath={.spec.template.spec.containers[".len()..]
                    .split(']')
                    .next()
                    .and_then(|i| i.parse::<usize>().ok())
                    .unwrap_or_else(|| panic!("unexpected template {rest:?}"));
                assert_eq!(
                    args,
                    k::get_container_settings(ns, name, index).as_slice(),
                    "only the settings template"
                );
                match state.daemonsets.get(&key) {
                    // Past the end: what kubectl says for an index out of range.
                    Some(ds) => match ds.containers.get(index) {
                        Some(c) => ok(settings_line(c)),
                        None => fail(format!(
                            "error: error executing jsonpath: array index out of bounds: index \
                             {index}, length {}",
                            ds.containers.len()
                        )),
                    },
                    None => not_found("daemonsets.apps", name),
                }
            }
            ("get", "daemonset") => {
                let template = rest[1]
                    .strip_prefix(
                        r#"jsonpath={.metadata.resourceVersion}{"\t"}{.metadata.annotations."#,
                    )
                    .and_then(|t| t.strip_suffix('}'))
                    .unwrap_or_else(|| panic!("unexpected template {rest:?}"));
                let annotation = template.replace('\\', "");
                match state.daemonsets.get(&key) {
                    None => not_found("daemonsets.apps", name),
                    Some(ds) => ok(format!(
                        "{}\t{}",
                        ds.rv,
                        ds.annotations.get(&annotation).cloned().unwrap_or_default()
                    )),
                }
            }
            ("annotate", "daemonset") => annotate(&mut state, &key, rest),
            ("create", "configmap") => {
                if state.configmaps.contains_key(&key) {
                    return fail(format!(
                        r#"error: failed to create configmap: configmaps "{name}" already exists"#
                    ));
                }
                let data = rest
                    .iter()
                    .map(|a| {
                        let (k, v) = a
                            .strip_prefix("--from-literal=")
                            .unwrap()
                            .split_once('=')
                            .unwrap();
                        (k.to_string(), v.to_string())
                    })
                    .collect();
                let rv = state.bump();
                let uid = format!("uid-{rv}");
                state.configmaps.insert(key, Cm { rv, uid, data });
                ok(format!("configmap/{name} created\n"))
            }
            ("get", "configmap") => {
                assert_eq!(rest, &k::get_lock_configmap(ns, name)[5..]);
                match state.configmaps.get(&key) {
                    None => not_found("configmaps", name),
                    Some(cm) => ok(format!(
                        "{}\t{}\t{}",
                        cm.rv,
                        cm.uid,
                        serde_json::to_string(&cm.data).unwrap()
                    )),
                }
            }
            ("patch", "configmap") => {
                assert_eq!(rest[..2], strings(&["--type=merge", "-p"]));
                let patch: serde_json::Value = serde_json::from_str(&rest[2]).unwrap();
                let rv = state.bump();
                let Some(cm) = state.configmaps.get_mut(&key) else {
                    return not_found("configmaps", name);
                };
                if let Some(want) = patch["metadata"]["resourceVersion"].as_str()
                    && want != cm.rv.to_string()
                {
                    return conflict("configmaps", name);
                }
                for (k, v) in patch["data"].as_object().unwrap() {
                    cm.data.insert(k.clone(), v.as_str().unwrap().to_string());
                }
                cm.rv = rv;
                ok(format!("configmap/{name} patched\n"))
            }
            _ => panic!("unexpected kubectl call {args:?}"),
        }
    }
}

impl Kubectl for Api {
    async fn kubectl(
        &self,
        _label: &str,
        args: &[String],
        stdin: Option<&str>,
    ) -> anyhow::Result<Output> {
        self.calls
            .lock()
            .unwrap()
            .push((args.to_vec(), stdin.map(String::from)));
        Ok(self.answer(args, stdin))
    }

    fn note(&self, kind: &str, detail: &str) {
        self.notes
            .lock()
            .unwrap()
            .push((kind.into(), detail.into()));
    }

    fn node(&self) -> &str {
        "cp-1"
    }
}

/// Kured as its Helm chart installs it: release `kured` in namespace
/// `kured` (`--ds-name`/`--ds-namespace` from the release).
pub fn helm_kured() -> Api {
    let api = Api::default();
    api.add_ds(
        "kube-system",
        "cilium",
        vec![Container::other(
            "cilium-agent",
            "quay.io/cilium/cilium:v1.18.1",
        )],
    );
    api.add_ds(
        "kured",
        "kured",
        vec![Container::kured(&[
            "--ds-name=kured",
            "--ds-namespace=kured",
            "--notify-url=slack://T0/B0/secret",
        ])],
    );
    api
}
