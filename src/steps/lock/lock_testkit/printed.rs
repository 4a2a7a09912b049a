//! What the fake API server prints, in kubectl's and the API server's
//! shapes and wording: the listings after their marker, one container's
//! settings, the errors, and the two writes with preconditions.

use serde_json::json;

use super::{Container, State};
use crate::remote::kubectl as k;
use crate::ssh::Output;

use super::{fail, ok};

pub(super) fn json_or_empty<T: serde::Serialize>(value: &T, empty: bool) -> String {
    if empty {
        String::new()
    } else {
        serde_json::to_string(value).unwrap()
    }
}

/// One container of a listing, as kubectl's jsonpath prints it after
/// `marker`: name, image, `command[0]` (nothing when there is no command)
/// and `privileged`.
pub(super) fn container_fields(m: &str, c: &Container) -> String {
    format!(
        "{m}container{m}{}{m}{}{m}{}{m}{}",
        c.name,
        c.image,
        c.command.first().map_or("", String::as_str),
        if c.privileged { "true" } else { "" }
    )
}

/// The marker of a listing's template (`{range .items[*]}MARKER…`).
pub(super) fn listing_marker(args: &[String], stdin: Option<&str>) -> Option<String> {
    if args != k::list_daemonsets("").args && args != k::list_pods("").args {
        return None;
    }
    let rest = stdin?.strip_prefix("{range .items[*]}")?;
    let end = rest[2..].find("@@")? + 4;
    Some(rest[..end].to_string())
}

/// One container's settings, as [`k::get_container_settings`] prints them:
/// lists as JSON, absent ones as nothing.
pub(super) fn settings_line(c: &Container) -> String {
    let env: Vec<serde_json::Value> = c
        .env
        .iter()
        .map(|(name, value)| match value {
            Some(v) => json!({"name": name, "value": v}),
            None => json!({"name": name, "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "spec.nodeName"}}}),
        })
        .collect();
    let env_from = if c.env_from {
        r#"[{"secretRef":{"name":"kured-secrets"}}]"#.to_string()
    } else {
        String::new()
    };
    [
        c.name.clone(),
        json_or_empty(&c.command, c.command.is_empty()),
        json_or_empty(&c.args, c.args.is_empty()),
        json_or_empty(&env, env.is_empty()),
        env_from,
    ]
    .join("\t")
}

pub(super) fn not_found(kind: &str, name: &str) -> Output {
    fail(format!(
        r#"Error from server (NotFound): {kind} "{name}" not found"#
    ))
}

pub(super) fn conflict(kind: &str, name: &str) -> Output {
    fail(format!(
        r#"Error from server (Conflict): Operation cannot be fulfilled on {kind} "{name}": the object has been modified; please apply your changes to the latest version and try again"#
    ))
}

/// `kubectl delete --raw /api/v1/namespaces/NS/configmaps/NAME -f -`: the
/// API server checks the body's preconditions first (apiserver
/// registry/rest `BeforeDelete`, in its wording).
pub(super) fn delete_raw(state: &mut State, path: &str, body: &str) -> Output {
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let ["api", "v1", "namespaces", ns, "configmaps", name] = parts[..] else {
        panic!("unexpected path {path}")
    };
    let body: serde_json::Value = serde_json::from_str(body).unwrap();
    let key = (ns.to_string(), name.to_string());
    let Some(cm) = state.configmaps.get(&key) else {
        return not_found("configmaps", name);
    };
    let pre = &body["preconditions"];
    if let Some(uid) = pre["uid"].as_str()
        && uid != cm.uid
    {
        return fail(format!(
            r#"Error from server (Conflict): Operation cannot be fulfilled on ConfigMap "{name}": the UID in the precondition ({uid}) does not match the UID in record ({}). The object might have been deleted and then recreated"#,
            cm.uid
        ));
    }
    if let Some(rv) = pre["resourceVersion"].as_str()
        && rv != cm.rv.to_string()
    {
        return fail(format!(
            r#"Error from server (Conflict): Operation cannot be fulfilled on ConfigMap "{name}": the ResourceVersion in the precondition ({rv}) does not match the ResourceVersion in record ({}). The object might have been modified"#,
            cm.rv
        ));
    }
    let uid = cm.uid.clone();
    state.configmaps.remove(&key);
    ok(json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
        "details": {"name": name, "kind": "configmaps", "uid": uid},
    })
    .to_string())
}

/// `kubectl annotate daemonset NAME (KEY=VALUE|KEY-) --resource-version=RV [--overwrite]`:
/// kubectl refuses to replace a value without `--overwrite`; the API server
/// refuses a stale resourceVersion.
pub(super) fn annotate(state: &mut State, key: &(String, String), rest: &[String]) -> Output {
    let rv = state.bump();
    let Some(ds) = state.daemonsets.get_mut(key) else {
        return not_found("daemonsets.apps", &key.1);
    };
    let change = &rest[0];
    let want_rv = rest
        .iter()
        .find_map(|a| a.strip_prefix("--resource-version="))
        .expect("the lock always names a resource version");
    let overwrite = rest.iter().any(|a| a == "--overwrite");
    if let Some(k) = change.strip_suffix('-') {
        if want_rv != ds.rv.to_string() {
            return conflict("daemonsets.apps", &key.1);
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
            return conflict("daemonsets.apps", &key.1);
        }
        ds.annotations.insert(k.into(), v.into());
    }
    ds.rv = rv;
    ok(format!("daemonset.apps/{} annotated\n", key.1))
}
