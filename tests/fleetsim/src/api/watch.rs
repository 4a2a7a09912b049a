//! `?watch=true`: a stream of `{"type":…,"object":…}` lines, one chunk
//! each (`apimachinery/pkg/apis/meta/v1` `WatchEvent`), as the apiserver's
//! watch over HTTP/1.1 sends them. The cluster state has no history, so the
//! stream is made by comparing what a selector selects every
//! [`POLL`]: a new object is ADDED, a changed one MODIFIED (a heartbeat's
//! time alone is no change: the real kubelet posts status only when it
//! changes or every few minutes), a vanished one DELETED.
//!
//! The start follows the watch-from semantics of the API
//! (`resourceVersion` unset or `0`: every current object as ADDED first;
//! a version: only objects newer than it, as MODIFIED, since the sim cannot
//! tell whether they existed then). The stream ends after
//! `timeoutSeconds` (default 30 minutes, the apiserver's
//! `--min-request-timeout` range), or when the instance goes down.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::Response;
use serde_json::{Value, json};

use super::Ctx;
use super::identity::User;
use super::server::{self, Body, Chunks, Reply, respond};
use super::status;
use super::store::meta;

/// How often a watch looks at the cluster again.
const POLL: Duration = Duration::from_millis(200);
const DEFAULT_TIMEOUT: u64 = 1800;

fn key(o: &Value) -> String {
    format!("{}/{}", meta(o, "namespace"), meta(o, "name"))
}

/// The object minus what changes without anything happening.
fn fingerprint(o: &Value) -> Value {
    let mut o = o.clone();
    if let Some(conds) = o["status"]["conditions"].as_array_mut() {
        for c in conds {
            if let Some(m) = c.as_object_mut() {
                m.remove("lastHeartbeatTime");
            }
        }
    }
    if let Some(spec) = o["spec"].as_object_mut() {
        spec.remove("renewTime");
    }
    o
}

fn event(kind: &str, o: &Value) -> Bytes {
    let mut line = serde_json::to_vec(&json!({"type": kind, "object": o})).unwrap_or_default();
    line.push(b'\n');
    Bytes::from(line)
}

fn rv(o: &Value) -> u64 {
    meta(o, "resourceVersion").parse().unwrap_or(0)
}

pub async fn serve(
    ctx: Arc<Ctx>,
    user: User,
    path: &str,
    q: BTreeMap<String, String>,
) -> Response<Body> {
    let t = match server::target(path) {
        None => return respond(status::path_not_found().into()),
        Some(Err(f)) => return respond(f.into()),
        Some(Ok(t)) => t,
    };
    let t = Arc::new(t);
    let q = Arc::new(q);
    let read = {
        let (ctx, t, q) = (ctx.clone(), t.clone(), q.clone());
        move || -> Result<Vec<Value>, status::Failure> {
            let c = ctx
                .shared
                .cluster()
                .map_err(|e| status::internal(&format!("{e:#}")))?;
            let f = ctx
                .shared
                .faults()
                .map_err(|e| status::internal(&format!("{e:#}")))?;
            let snap = super::store::Snapshot::new(c, f, &ctx.removed);
            server::selected(&snap, &t, &q)
        }
    };
    let first = {
        let (ctx, t, read) = (ctx.clone(), t.clone(), read.clone());
        tokio::task::spawn_blocking(move || {
            server::admit(&ctx, &user, &t, "watch")?;
            read()
        })
        .await
    };
    let initial = match first {
        Ok(Ok(items)) => items,
        Ok(Err(f)) => return respond(Reply::from(f)),
        Err(e) => return respond(status::internal(&format!("watch failed: {e}")).into()),
    };
    let timeout = q
        .get("timeoutSeconds")
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or(DEFAULT_TIMEOUT);
    let since = q.get("resourceVersion").cloned().unwrap_or_default();
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(64);
    tokio::spawn(async move {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(timeout);
        let mut known: BTreeMap<String, (Value, Value)> = BTreeMap::new();
        let from: Option<u64> = match since.as_str() {
            "" | "0" => None,
            v => v.parse().ok(),
        };
        for o in initial {
            let send = match from {
                None => Some("ADDED"),
                Some(v) if rv(&o) > v => Some("MODIFIED"),
                Some(_) => None,
            };
            if let Some(kind) = send
                && tx.send(event(kind, &o)).await.is_err()
            {
                return;
            }
            known.insert(key(&o), (fingerprint(&o), o));
        }
        loop {
            tokio::select! {
                _ = tokio::time::sleep_until(deadline) => return,
                _ = tokio::time::sleep(POLL) => {}
            }
            let Ok(Ok(now)) = tokio::task::spawn_blocking(read.clone()).await else {
                return;
            };
            let mut next: BTreeMap<String, (Value, Value)> = BTreeMap::new();
            for o in now {
                next.insert(key(&o), (fingerprint(&o), o));
            }
            let mut events = Vec::new();
            for (k, (fp, o)) in &next {
                match known.get(k) {
                    None => events.push(event("ADDED", o)),
                    Some((old, _)) if old != fp => events.push(event("MODIFIED", o)),
                    Some(_) => {}
                }
            }
            for (k, (_, o)) in &known {
                if !next.contains_key(k) {
                    events.push(event("DELETED", o));
                }
            }
            for e in events {
                if tx.send(e).await.is_err() {
                    return;
                }
            }
            known = next;
        }
    });
    let mut r = Response::new(Chunks(rx).boxed());
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    r
}
