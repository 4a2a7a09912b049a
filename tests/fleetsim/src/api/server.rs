//! HTTPS and routing: TLS with client certificates (the identity), HTTP/1.1
//! (the only protocol offered by ALPN, so Go's client does not try h2),
//! then one request at a time: the non-resource paths, discovery, and the
//! resource paths `/api/v1/…` and `/apis/<group>/<version>/…`
//! (`[namespaces/<ns>/]<resource>[/<name>[/<subresource>]]`), authorized,
//! then read or written through the store. Reads and writes take the
//! cluster state's flock, so they run on tokio's blocking pool.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Frame, Incoming};
use hyper::{Method, Request, Response};
use serde_json::{Value, json};

use super::auth::{self, Attributes};
use super::identity::User;
use super::status::{self, Failure};
use super::store::{self, Fields, Labels, Resource, Snapshot, meta};
use super::write::{self, Change, PatchType};
use super::{Ctx, Instance, discovery};
use crate::tools::util::KubeVersion;

pub type Body = BoxBody<Bytes, Infallible>;

/// The most a request body may carry (the apiserver's limit is 3 MiB).
const MAX_BODY: usize = 3 << 20;

/// A streamed body: each message is one chunk.
pub struct Chunks(pub tokio::sync::mpsc::Receiver<Bytes>);

impl hyper::body::Body for Chunks {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0.poll_recv(cx).map(|o| o.map(|b| Ok(Frame::data(b))))
    }
}

/// What a request gets back.
pub enum Reply {
    Json(u16, Value),
    Text(u16, String),
}

impl From<Failure> for Reply {
    fn from(f: Failure) -> Reply {
        Reply::Json(f.code, f.body)
    }
}

pub fn respond(reply: Reply) -> Response<Body> {
    let (code, ct, bytes) = match reply {
        Reply::Json(code, v) => {
            // The apiserver's encoder ends every body with a newline.
            let text = status::go_order(&v).unwrap_or_else(|| format!("{v}\n"));
            (code, "application/json", text.into_bytes())
        }
        Reply::Text(code, t) => (code, "text/plain; charset=utf-8", t.into_bytes()),
    };
    let mut r = Response::new(Full::new(Bytes::from(bytes)).boxed());
    *r.status_mut() =
        hyper::StatusCode::from_u16(code).unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    if let Ok(v) = hyper::header::HeaderValue::from_str(ct) {
        r.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
    }
    r
}

/// The decoded query string (the last value of a repeated key).
pub fn query(q: Option<&str>) -> BTreeMap<String, String> {
    pairs(q).into_iter().collect()
}

/// The decoded query string, every pair in order (exec repeats `command`).
pub fn pairs(q: Option<&str>) -> Vec<(String, String)> {
    fn unescape(s: &str) -> String {
        let bytes = s.as_bytes();
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'+' => out.push(b' '),
                b'%' if i + 2 < bytes.len() => {
                    let hex = |c: u8| (c as char).to_digit(16);
                    match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                        (Some(h), Some(l)) => {
                            out.push((h * 16 + l) as u8);
                            i += 2;
                        }
                        _ => out.push(b'%'),
                    }
                }
                b => out.push(b),
            }
            i += 1;
        }
        String::from_utf8_lossy(&out).into_owned()
    }
    q.unwrap_or("")
        .split('&')
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (unescape(k), unescape(v))
        })
        .collect()
}

/// A resource path, parsed.
pub struct Target {
    pub resource: &'static Resource,
    pub namespace: String,
    pub name: String,
    pub subresource: String,
}

/// `/api/v1/...` or `/apis/<g>/<v>/...` beyond discovery.
pub fn target(path: &str) -> Option<Result<Target, Failure>> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match segs.as_slice() {
        ["api", v, rest @ ..] if !rest.is_empty() => ("", *v, rest),
        ["apis", g, v, rest @ ..] if !rest.is_empty() => (*g, *v, rest),
        _ => return None,
    };
    let (ns, rest) = match rest {
        ["namespaces", ns, res, more @ ..] if group.is_empty() || !res.is_empty() => {
            if group.is_empty() && matches!(*res, "status" | "finalize") && more.is_empty() {
                ("", rest)
            } else {
                (*ns, &rest[2..])
            }
        }
        _ => ("", rest),
    };
    let (res, name, sub) = match rest {
        [res] => (*res, "", ""),
        [res, name] => (*res, *name, ""),
        [res, name, sub] => (*res, *name, *sub),
        _ => return Some(Err(status::path_not_found())),
    };
    let Some(r) = store::resource(group, version, res) else {
        return Some(Err(status::path_not_found()));
    };
    if r.namespaced == ns.is_empty() && !(r.namespaced && ns.is_empty() && name.is_empty()) {
        return Some(Err(status::path_not_found()));
    }
    Some(Ok(Target {
        resource: r,
        namespace: ns.to_string(),
        name: name.to_string(),
        subresource: sub.to_string(),
    }))
}

/// The verb the authorizer sees.
pub fn verb(method: &Method, t: &Target, watch: bool) -> &'static str {
    match *method {
        Method::GET if watch => "watch",
        Method::GET if t.name.is_empty() => "list",
        Method::GET => "get",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE if t.name.is_empty() => "deletecollection",
        Method::DELETE => "delete",
        _ => "unknown",
    }
}

pub fn attributes<'a>(t: &'a Target, verb: &'a str) -> Attributes<'a> {
    Attributes {
        verb,
        group: t.resource.group,
        resource: t.resource.name,
        subresource: &t.subresource,
        namespace: &t.namespace,
        name: &t.name,
    }
}

/// The validating webhook `deny_node_updates` plays.
const DENY_WEBHOOK: &str = "freeze.policy.example.com";

/// Authorization and NodeRestriction for a resource request (and the
/// admission webhook of the `deny_node_updates` fault).
pub fn admit(ctx: &Ctx, user: &User, t: &Target, verb: &str) -> Result<(), Failure> {
    let faults = ctx
        .shared
        .faults()
        .map_err(|e| status::internal(&format!("{e:#}")))?;
    let a = attributes(t, verb);
    if let Err(reason) = auth::authorize(user, &a, faults.kured_lock_forbidden) {
        return Err(auth::refusal(user, &a, &reason));
    }
    if t.resource.name == "nodes"
        && matches!(verb, "update" | "patch")
        && faults.deny_node_updates.contains(&t.name)
    {
        return Err(status::webhook_denied(
            DENY_WEBHOOK,
            "nodes are frozen by policy",
        ));
    }
    if let Some(me) = user.node()
        && t.resource.name == "nodes"
        && matches!(verb, "update" | "patch" | "delete")
        && t.name != me
    {
        return Err(status::forbidden(
            t.resource.gr(),
            &t.name,
            &format!("node {me:?} is not allowed to modify node {:?}", t.name),
        ));
    }
    Ok(())
}

/// A list of `r`'s objects filtered by namespace and selectors.
pub fn selected(
    snap: &Snapshot,
    t: &Target,
    q: &BTreeMap<String, String>,
) -> Result<Vec<Value>, Failure> {
    let labels = Labels::parse(q.get("labelSelector").map_or("", String::as_str))?;
    let fields = Fields::parse(
        t.resource,
        q.get("fieldSelector").map_or("", String::as_str),
    )?;
    Ok(snap
        .objects(t.resource)
        .into_iter()
        .filter(|o| t.namespace.is_empty() || meta(o, "namespace") == t.namespace)
        .filter(|o| t.name.is_empty() || meta(o, "name") == t.name)
        .filter(|o| labels.matches(o) && fields.matches(o))
        .collect())
}

fn snapshot(ctx: &Ctx) -> Result<Snapshot, Failure> {
    let c = ctx
        .shared
        .cluster()
        .map_err(|e| status::internal(&format!("{e:#}")))?;
    let f = ctx
        .shared
        .faults()
        .map_err(|e| status::internal(&format!("{e:#}")))?;
    Ok(Snapshot::new(c, f, &ctx.removed))
}

fn parse_body(content_type: &str, body: &[u8]) -> Result<Value, Failure> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(json!({}));
    }
    if content_type.starts_with(super::proto::CONTENT_TYPE) {
        return super::proto::decode(body).map_err(|e| status::unsupported_media_type(&e));
    }
    serde_json::from_slice(body).map_err(|e| {
        status::bad_request(&format!(
            "the body of the request could not be decoded: {e}"
        ))
    })
}

/// One request, read.
pub struct Call {
    pub method: Method,
    pub path: String,
    pub query: BTreeMap<String, String>,
    pub content_type: String,
    pub accept: String,
    pub body: Bytes,
}

/// Everything but watch and exec.
pub fn route(ctx: &Ctx, inst: &Instance, user: &User, call: &Call) -> Reply {
    let (method, path) = (&call.method, call.path.as_str());
    let get = method == Method::GET || method == Method::HEAD;
    match path.trim_end_matches('/') {
        "/healthz" | "/livez" | "/readyz" if get => return Reply::Text(200, "ok".into()),
        "/version" if get => {
            let v = ctx.shared.cluster().ok().and_then(|c| {
                let n = c.nodes.get(&inst.name)?;
                KubeVersion::parse(n.control_plane_version.as_deref().unwrap_or(&c.version))
            });
            return match v {
                Some(v) => Reply::Json(200, crate::tools::util::version_info(v)),
                None => status::internal("no version").into(),
            };
        }
        "/metrics" if get => {
            if !user.is_admin() {
                return auth::path_refusal(user, "get", "/metrics").into();
            }
            return match ctx.shared.cluster() {
                // Each instance counts only the requests it served.
                Ok(c) => Reply::Text(200, super::metrics::text(&c, &inst.name)),
                Err(e) => status::internal(&format!("{e:#}")).into(),
            };
        }
        "/api" if get => return Reply::Json(200, discovery::api_versions(&inst.address)),
        "/apis" if get => return Reply::Json(200, discovery::api_group_list()),
        "/api/v1" if get => {
            return discovery::resource_list("", "v1")
                .map_or_else(|| status::path_not_found().into(), |d| Reply::Json(200, d));
        }
        p if get && p.starts_with("/apis/") && p.matches('/').count() <= 3 => {
            let parts: Vec<&str> = p.trim_start_matches("/apis/").split('/').collect();
            let doc = match parts.as_slice() {
                [g] => discovery::api_group(g),
                [g, v] => discovery::resource_list(g, v),
                _ => None,
            };
            return doc.map_or_else(|| status::path_not_found().into(), |d| Reply::Json(200, d));
        }
        _ => {}
    }
    let t = match target(path) {
        None => return status::path_not_found().into(),
        Some(Err(f)) => return f.into(),
        Some(Ok(t)) => t,
    };
    let verb = verb(method, &t, false);
    if let Err(f) = admit(ctx, user, &t, verb) {
        return f.into();
    }
    match resource_call(ctx, user, &t, call) {
        Ok(r) => r,
        Err(f) => f.into(),
    }
}

fn resource_call(ctx: &Ctx, user: &User, t: &Target, call: &Call) -> Result<Reply, Failure> {
    let (method, q, body) = (&call.method, &call.query, &call.body[..]);
    let content_type = call.content_type.as_str();
    let r = t.resource;
    let sub = t.subresource.as_str();
    match (method.clone(), sub) {
        (Method::GET, "") if t.name.is_empty() => {
            let snap = snapshot(ctx)?;
            let items = selected(&snap, t, q)?;
            if super::table::wanted(&call.accept) {
                let whole = q.get("includeObject").is_some_and(|v| v == "Object");
                let doc = super::table::table(r, &items, &snap.resource_version(), snap.now, whole);
                return Ok(Reply::Json(200, doc));
            }
            Ok(Reply::Json(
                200,
                json!({
                    "kind": format!("{}List", r.kind),
                    "apiVersion": r.api_version(),
                    "metadata": {"resourceVersion": snap.resource_version()},
                    "items": items,
                }),
            ))
        }
        (Method::GET, "" | "status") => {
            let snap = snapshot(ctx)?;
            let o = snap.get(r, &t.namespace, &t.name)?;
            if sub.is_empty() && super::table::wanted(&call.accept) {
                let whole = q.get("includeObject").is_some_and(|v| v == "Object");
                let doc = super::table::table(r, &[o], &snap.resource_version(), snap.now, whole);
                return Ok(Reply::Json(200, doc));
            }
            Ok(Reply::Json(200, o))
        }
        (Method::POST, "eviction") if r.name == "pods" => {
            let (code, v) = super::evict::evict(
                &ctx.shared,
                &ctx.removed,
                user,
                &t.namespace,
                &t.name,
                &parse_body(content_type, body)?,
            )?;
            Ok(Reply::Json(code, v))
        }
        (Method::POST, "") if t.name.is_empty() => {
            let (code, v) = write::create(
                &ctx.shared,
                r,
                &t.namespace,
                &parse_body(content_type, body)?,
            )?;
            Ok(Reply::Json(code, v))
        }
        (Method::PUT, "") => {
            let (code, v) = write::modify(
                &ctx.shared,
                &ctx.removed,
                r,
                &t.namespace,
                &t.name,
                Change::Update(parse_body(content_type, body)?),
            )?;
            Ok(Reply::Json(code, v))
        }
        (Method::PATCH, "") => {
            let Some(kind) = PatchType::from_content_type(content_type) else {
                return Err(status::unsupported_media_type(&format!(
                    "the body of the request was in an unknown format - accepted media types include: \
                     application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, \
                     application/strategic-merge-patch+json (got {content_type:?})"
                )));
            };
            let (code, v) = write::modify(
                &ctx.shared,
                &ctx.removed,
                r,
                &t.namespace,
                &t.name,
                Change::Patch(kind, parse_body(content_type, body)?),
            )?;
            Ok(Reply::Json(code, v))
        }
        (Method::DELETE, "") if !t.name.is_empty() => {
            let (code, v) = write::delete(
                &ctx.shared,
                &ctx.removed,
                r,
                &t.namespace,
                &t.name,
                &parse_body(content_type, body)?,
            )?;
            Ok(Reply::Json(code, v))
        }
        (_, "exec") => Err(status::bad_request(
            "fleetsim serves pods/exec over WebSocket (v5.channel.k8s.io, v4.channel.k8s.io) only, not SPDY",
        )),
        _ => Err(status::method_not_supported(r.gr(), verb(method, t, false))),
    }
}

/// Reads a request's body, bounded.
pub async fn read_body(req: Request<Incoming>) -> Result<Bytes, Failure> {
    Limited::new(req.into_body(), MAX_BODY)
        .collect()
        .await
        .map(|b| b.to_bytes())
        .map_err(|_| {
            Failure {
                code: 413,
                body: json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": "the server has rejected the request because its body is too large", "reason": "RequestEntityTooLarge", "code": 413}),
            }
        })
}

/// Serves one request of an authenticated (or not) client.
pub async fn handle(
    ctx: Arc<Ctx>,
    inst: Instance,
    user: Option<User>,
    req: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    if !ctx.latency.is_zero() {
        tokio::time::sleep(ctx.latency).await;
    }
    let Some(user) = user else {
        return Ok(respond(status::unauthorized().into()));
    };
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let q = query(req.uri().query());
    if path.ends_with("/exec") && super::exec::is_upgrade(&req) {
        let all = pairs(req.uri().query());
        return Ok(super::exec::serve(ctx, user, path, all, req).await);
    }
    let watching =
        method == Method::GET && matches!(q.get("watch").map(String::as_str), Some("true" | "1"));
    if watching {
        return Ok(super::watch::serve(ctx, user, &path, q).await);
    }
    let content_type = req
        .headers()
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let accept = req
        .headers()
        .get(hyper::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let body = match read_body(req).await {
        Ok(b) => b,
        Err(f) => return Ok(respond(f.into())),
    };
    let call = Call {
        method,
        path,
        query: q,
        content_type,
        accept,
        body,
    };
    let reply = tokio::task::spawn_blocking(move || route(&ctx, &inst, &user, &call))
        .await
        .unwrap_or_else(|e| status::internal(&format!("request handler failed: {e}")).into());
    Ok(respond(reply))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_name_their_resource() {
        let t = target("/api/v1/namespaces/default/pods/web-1/eviction")
            .unwrap()
            .ok()
            .unwrap();
        assert_eq!(
            (
                t.resource.name,
                t.namespace.as_str(),
                t.name.as_str(),
                t.subresource.as_str()
            ),
            ("pods", "default", "web-1", "eviction")
        );
        let t = target("/api/v1/pods").unwrap().ok().unwrap();
        assert_eq!((t.resource.name, t.namespace.as_str()), ("pods", ""));
        let t = target("/api/v1/namespaces/kube-system")
            .unwrap()
            .ok()
            .unwrap();
        assert_eq!(
            (t.resource.name, t.name.as_str()),
            ("namespaces", "kube-system")
        );
        let t = target("/apis/apps/v1/namespaces/kube-system/daemonsets/kured")
            .unwrap()
            .ok()
            .unwrap();
        assert_eq!((t.resource.name, t.name.as_str()), ("daemonsets", "kured"));
        let t = target("/api/v1/nodes/w-1").unwrap().ok().unwrap();
        assert_eq!((t.resource.name, t.name.as_str()), ("nodes", "w-1"));
        assert!(target("/api/v1/secrets").unwrap().is_err());
        assert!(
            target("/api/v1/namespaces/default/nodes/w-1")
                .unwrap()
                .is_err()
        );
        assert!(target("/version").is_none());
    }

    #[test]
    fn queries_are_unescaped() {
        let q = query(Some(
            "fieldSelector=spec.nodeName%3Dw-1&watch=true&labelSelector=a+in+(b)",
        ));
        assert_eq!(q["fieldSelector"], "spec.nodeName=w-1");
        assert_eq!(q["watch"], "true");
        assert_eq!(q["labelSelector"], "a in (b)");
        assert_eq!(query(Some("x=%zz%4"))["x"], "%zz%4");
    }
}
