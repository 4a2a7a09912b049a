//! A small in-memory API server that answers the kubectl calls the lock
//! makes as the real one does (resourceVersion preconditions, kubectl's own
//! `--overwrite` check, NotFound / AlreadyExists / Conflict in kubectl's
//! wording), with hooks that play a concurrent writer; and the helpers the
//! lock's tests share.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::SystemTime;

use serde_json::json;

use super::{Holder, Identity, Kubectl, LockHeld, LockOptions};
use crate::ssh::Output;

pub(crate) const NOW: &str = "2026-11-29T19:30:12Z";

pub(crate) fn at(rfc: &str) -> SystemTime {
    humantime::parse_rfc3339(rfc).unwrap()
}

pub(crate) fn me() -> Identity {
    Identity {
        user: "alice".into(),
        host: "laptop".into(),
        pid: 4242,
    }
}

pub(crate) fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

pub(crate) fn holder(id: &str, since: &str) -> Holder {
    Holder {
        id: id.into(),
        since: since.into(),
        pid: None,
        host: None,
    }
}

// ---------------------------------------------------------------------------
// The fake API server

// ---------------------------------------------------------------------------
// The fake API server

#[derive(Debug, Clone, Default)]
pub(crate) struct Ds {
    pub(crate) rv: u64,
    pub(crate) annotations: BTreeMap<String, String>,
    pub(crate) args: Vec<String>,
}

#[derive(Debug, Default)]
pub(crate) struct State {
    pub(crate) next_rv: u64,
    pub(crate) daemonsets: BTreeMap<(String, String), Ds>,
    pub(crate) configmaps: BTreeMap<(String, String), (u64, BTreeMap<String, String>)>,
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

    pub(crate) fn annotation(&self, ns: &str, name: &str, key: &str) -> Option<String> {
        self.daemonsets[&(ns.to_string(), name.to_string())]
            .annotations
            .get(key)
            .cloned()
    }
}

pub(crate) type Hook = Box<dyn FnOnce(&mut State) + Send>;

/// Answers the kubectl calls the lock makes, as a real API server and
/// kubectl would, and records every call and journal note.
#[derive(Default)]
pub(crate) struct Api {
    pub(crate) state: Mutex<State>,
    pub(crate) calls: Mutex<Vec<Vec<String>>>,
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
    pub(crate) fn with_kured(args: &[&str]) -> Api {
        let api = Api::default();
        api.add_ds("kube-system", "kured", args);
        api
    }

    pub(crate) fn add_ds(&self, ns: &str, name: &str, args: &[&str]) {
        let mut state = self.state.lock().unwrap();
        let rv = state.bump();
        state.daemonsets.insert(
            (ns.into(), name.into()),
            Ds {
                rv,
                annotations: BTreeMap::new(),
                args: strings(args),
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
    pub(crate) fn run_hook(&self, queue: &Mutex<Vec<Hook>>) {
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

    pub(crate) fn verbs(&self) -> Vec<String> {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .map(|c| format!("{} {}", c[2], c[3]))
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

    pub(crate) fn answer(&self, args: &[String]) -> Output {
        let [dash_n, ns, verb, kind, name, rest @ ..] = args else {
            panic!("unexpected kubectl call {args:?}")
        };
        assert_eq!(dash_n, "-n");
        let is_write = matches!(verb.as_str(), "annotate" | "create" | "delete");
        if is_write {
            self.run_hook(&self.before_write);
        }
        let out = self.serve(ns, verb, kind, name, rest);
        if is_write {
            self.run_hook(&self.after_write);
        }
        out
    }

    pub(crate) fn serve(
        &self,
        ns: &String,
        verb: &str,
        kind: &str,
        name: &String,
        rest: &[String],
    ) -> Output {
        let mut state = self.state();
        let key = (ns.clone(), name.clone());
        match (verb, kind) {
            ("get", "daemonset") => match state.daemonsets.get(&key) {
                None => fail(format!(r#"Error from server (NotFound): daemonsets.apps "{name}" not found"#)),
                Some(ds) => ok(json!({
                    "kind": "DaemonSet",
                    "metadata": {"name": name, "namespace": ns, "resourceVersion": ds.rv.to_string(),
                                 "annotations": ds.annotations},
                    "spec": {"template": {"spec": {"containers": [
                        {"name": "kured", "command": ["/usr/bin/kured"], "args": ds.args}
                    ]}}},
                })
                .to_string()),
            },
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
                        let (k, v) = a.strip_prefix("--from-literal=").unwrap().split_once('=').unwrap();
                        (k.to_string(), v.to_string())
                    })
                    .collect();
                let rv = state.bump();
                state.configmaps.insert(key, (rv, data));
                ok(format!("configmap/{name} created\n"))
            }
            ("get", "configmap") => match state.configmaps.get(&key) {
                None => fail(format!(r#"Error from server (NotFound): configmaps "{name}" not found"#)),
                Some((rv, data)) => ok(json!({
                    "kind": "ConfigMap",
                    "metadata": {"name": name, "namespace": ns, "resourceVersion": rv.to_string()},
                    "data": data,
                })
                .to_string()),
            },
            ("delete", "configmap") => match state.configmaps.remove(&key) {
                None => fail(format!(r#"Error from server (NotFound): configmaps "{name}" not found"#)),
                Some(_) => ok(format!("configmap \"{name}\" deleted\n")),
            },
            _ => panic!("unexpected kubectl call {verb} {kind}"),
        }
    }
}

/// `kubectl annotate daemonset NAME (KEY=VALUE|KEY-) --resource-version=RV [--overwrite]`:
/// kubectl fetches the object and refuses to replace a value without
/// `--overwrite`; the API server refuses a stale resourceVersion.
pub(crate) fn annotate(state: &mut State, key: &(String, String), rest: &[String]) -> Output {
    let rv = state.bump();
    let Some(ds) = state.daemonsets.get_mut(key) else {
        return fail(format!(
            r#"Error from server (NotFound): daemonsets.apps "{}" not found"#,
            key.1
        ));
    };
    let change = &rest[0];
    let want_rv = rest
        .iter()
        .find_map(|a| a.strip_prefix("--resource-version="))
        .expect("the lock always names a resource version");
    let overwrite = rest.iter().any(|a| a == "--overwrite");
    let conflict = || {
        fail(format!(
            r#"Error from server (Conflict): Operation cannot be fulfilled on daemonsets.apps "{}": the object has been modified; please apply your changes to the latest version and try again"#,
            key.1
        ))
    };
    if let Some(k) = change.strip_suffix('-') {
        if want_rv != ds.rv.to_string() {
            return conflict();
        }
        ds.annotations.remove(k);
    } else {
        let (k, v) = change.split_once('=').unwrap();
        if let Some(current) = ds.annotations.get(k).filter(|c| *c != v && !overwrite) {
            return fail(format!(
                "error: --overwrite is false but found the following declared annotation(s): '{k}' already has a value ({current})"
            ));
        }
        if want_rv != ds.rv.to_string() {
            return conflict();
        }
        ds.annotations.insert(k.into(), v.into());
    }
    ds.rv = rv;
    ok(format!("daemonset.apps/{} annotated\n", key.1))
}

impl Kubectl for Api {
    async fn kubectl(&self, _label: &str, args: &[String]) -> anyhow::Result<Output> {
        self.calls.lock().unwrap().push(args.to_vec());
        Ok(self.answer(args))
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

pub(crate) fn force() -> LockOptions {
    LockOptions {
        force_unlock: true,
        ..LockOptions::default()
    }
}

pub(crate) fn held(err: &anyhow::Error) -> &LockHeld {
    err.downcast_ref::<LockHeld>()
        .unwrap_or_else(|| panic!("not LockHeld: {err:#}"))
}
