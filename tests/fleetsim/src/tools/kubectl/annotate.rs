//! `kubectl annotate` of a DaemonSet: how fleetctl takes and gives back
//! Kured's lock (`weave.works/kured-node-lock`), with `--overwrite` and a
//! `--resource-version` precondition checked inside one `update_cluster`.

use anyhow::Result;

use super::nodes::not_found;
use super::objects::*;
use super::{Cli, Env, Kind, Res, connect, resource};
use crate::state::DaemonSet;
use crate::tools::say;

enum Change {
    Set(String, String),
    Remove(String),
}

enum Annotated {
    Done,
    NotFound,
    NotEmulated,
    Overwrite(String),
    Conflict,
    Forbidden,
}

fn parse_changes(words: &[String]) -> Result<Vec<Change>, String> {
    words
        .iter()
        .map(|w| {
            if let Some((k, v)) = w.split_once('=').filter(|(k, _)| !k.is_empty()) {
                Ok(Change::Set(k.to_string(), v.to_string()))
            } else if let Some(k) = w.strip_suffix('-').filter(|k| !k.is_empty()) {
                Ok(Change::Remove(k.to_string()))
            } else {
                Err(format!("error: invalid annotation format: {w}"))
            }
        })
        .collect()
}

/// kubectl refuses, client-side, to change an existing value without --overwrite.
fn overwrite_refusal(ds: &DaemonSet, changes: &[Change]) -> Option<String> {
    let clashes: Vec<String> = changes
        .iter()
        .filter_map(|ch| match ch {
            Change::Set(k, v) => ds
                .annotations
                .get(k)
                .filter(|cur| *cur != v)
                .map(|cur| format!("'{k}' already has a value ({cur})")),
            Change::Remove(_) => None,
        })
        .collect();
    (!clashes.is_empty()).then(|| {
        format!(
            "error: --overwrite is false but found the following declared annotation(s): {}",
            clashes.join("; ")
        )
    })
}

/// `annotate daemonset NAME K=V… [K-] [--overwrite] [--resource-version=N]`.
pub(super) fn annotate(env: &mut Env, args: &[String], cli: &Cli) -> Result<Res> {
    let words = &cli.words[1..];
    let (target, rest) = match words {
        [one, rest @ ..] if one.contains('/') => (resource(std::slice::from_ref(one)), rest),
        [_, _, rest @ ..] => (resource(&words[..2]), rest),
        _ => (None, words),
    };
    let Some((Kind::DaemonSet, Some(name))) = target else {
        return Ok(Res::unsupported(env, args));
    };
    let changes = match parse_changes(rest) {
        Ok(c) if c.is_empty() => {
            return Ok(Res::fail(
                env,
                "error: at least one annotation update is required",
            ));
        }
        Ok(c) => c,
        Err(msg) => return Ok(Res::fail(env, &msg)),
    };
    match connect(env, cli)? {
        // The GET of the object, then its PATCH.
        Ok(c) => super::round_trip(&c),
        Err(msg) => return Ok(Res::fail(env, &msg)),
    }
    let ns = cli.namespace().to_string();
    let overwrite = cli.switch("overwrite");
    let precondition = cli.flag("resource-version").map(str::to_string);
    let forbidden = env.shared().faults()?.kured_lock_forbidden;
    let outcome = env.shared().update_cluster(|c| {
        let built_in = name == "cilium" || (name == "kube-proxy" && c.kube_proxy);
        if built_in && ns == KUBE_SYSTEM {
            return Ok(Annotated::NotEmulated);
        }
        let next = c.next_resource_version();
        let Some(ds) = c
            .kured
            .as_mut()
            .filter(|k| k.namespace == ns && k.name == name)
        else {
            return Ok(Annotated::NotFound);
        };
        if !overwrite && let Some(msg) = overwrite_refusal(ds, &changes) {
            return Ok(Annotated::Overwrite(msg));
        }
        // kubectl GETs first (allowed), checks --overwrite, then PATCHes:
        // authorization refuses that before the object is compared.
        if forbidden {
            return Ok(Annotated::Forbidden);
        }
        if precondition
            .as_ref()
            .is_some_and(|rv| *rv != ds.resource_version.to_string())
        {
            return Ok(Annotated::Conflict);
        }
        for ch in &changes {
            match ch {
                Change::Set(k, v) => {
                    ds.annotations.insert(k.clone(), v.clone());
                }
                Change::Remove(k) => {
                    ds.annotations.remove(k);
                }
            }
        }
        ds.resource_version = next;
        c.resource_version = next;
        Ok(Annotated::Done)
    })?;
    Ok(match outcome {
        Annotated::Done => {
            say!(env, "daemonset.apps/{name} annotated");
            Res::ok()
        }
        Annotated::NotFound => Res::fail(env, &not_found("daemonsets.apps", name)),
        Annotated::NotEmulated => Res::unsupported(env, args),
        Annotated::Overwrite(msg) => Res::fail(env, &msg),
        Annotated::Forbidden => Res::fail(
            env,
            &format!(
                "Error from server (Forbidden): daemonsets.apps \"{name}\" is forbidden: User \"{ADMIN_USER}\" \
                 cannot patch resource \"daemonsets\" in API group \"apps\" in the namespace \"{ns}\""
            ),
        ),
        Annotated::Conflict => Res::fail(
            env,
            &format!(
                "Error from server (Conflict): Operation cannot be fulfilled on daemonsets.apps \"{name}\": \
                 the object has been modified; please apply your changes to the latest version and try again"
            ),
        ),
    })
}
