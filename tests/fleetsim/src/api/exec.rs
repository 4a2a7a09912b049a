//! `pods/<name>/exec` over WebSocket, the protocol kubectl ≥ 1.30 speaks
//! first (`client-go/tools/remotecommand/websocket.go`; the server side is
//! `apimachinery/pkg/util/httpstream/wsstream/conn.go`):
//!
//! - a GET with `Upgrade: websocket` and `Sec-WebSocket-Protocol` listing
//!   `v5.channel.k8s.io` (then v4…); the query names the `command` words,
//!   `container`, `stdin`, `stdout`, `stderr`, `tty`;
//! - authorized as `create` on `pods/exec` (the apiserver checks create
//!   for WebSocket upgrades since 1.31, `AuthorizePodWebsocketUpgradeCreatePermission`);
//! - binary messages whose first byte is the stream: 0 stdin, 1 stdout,
//!   2 stderr, 3 the error stream (one `metav1.Status` at the end), 4
//!   resize; v5 adds 255, `[255, stream]` closing a stream (stdin's EOF);
//! - the end: Status `Success`, or `Failure` with reason `NonZeroExitCode`
//!   and a cause `ExitCode` whose message is the code, which kubectl turns
//!   into "command terminated with exit code N" and its own exit code.
//!
//! The command runs where the pod runs: on its node, reached as root over
//! the fleet's SSH, as the kubelet would run it through the node's
//! container runtime. The etcd pods are the only ones with a container
//! model: `etcd_pod::container` (the node's `etcd-container` entry, given
//! the pod and its image's tag), whose etcdctl is the real one against the
//! node's real etcd member. It never goes through the node's kubectl. A
//! command the runtime cannot start (no such binary in the image) is the
//! kubelet's `InternalError` Status on the error stream
//! (`kubelet/cri/streaming/remotecommand/exec.go`, `ServeExec`), which
//! kubectl prints as `error: Internal error occurred: …` and exits 1.
//! Any other pod has no container here: the kubelet's 500, said plainly.
//! The sim knows only SPDY's absence: kubectl falls back to SPDY when the
//! upgrade fails, and here it never fails.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use http_body_util::{BodyExt, Empty};
use hyper::{Request, Response, body::Incoming};
use hyper_util::rt::TokioIo;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role};

use super::Ctx;
use super::identity::User;
use super::server::{self, Body, respond};
use super::status;
use crate::etcd_pod::container::{ENTRY_PATH, RUNTIME_ERROR, RUNTIME_ERROR_CODE};

const PROTOCOLS: [&str; 2] = ["v5.channel.k8s.io", "v4.channel.k8s.io"];
const STDIN: u8 = 0;
const STDOUT: u8 = 1;
const STDERR: u8 = 2;
const ERROR: u8 = 3;
const CLOSE: u8 = 255;

/// How to reach a node as root: the fleet's own SSH.
#[derive(Debug, Clone)]
pub struct Ssh {
    pub identity: std::path::PathBuf,
    pub known_hosts: std::path::PathBuf,
    pub port: u16,
    /// Node name → address.
    pub addresses: BTreeMap<String, String>,
}

/// A word for the remote shell, single-quoted.
fn quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

fn header<'a>(req: &'a Request<Incoming>, name: &str) -> &'a str {
    req.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

/// Whether `req` asks to upgrade to a WebSocket.
pub fn is_upgrade(req: &Request<Incoming>) -> bool {
    header(req, "upgrade").eq_ignore_ascii_case("websocket")
}

fn frame(stream: u8, data: &[u8]) -> Message {
    let mut v = Vec::with_capacity(data.len() + 1);
    v.push(stream);
    v.extend_from_slice(data);
    Message::Binary(v.into())
}

/// Serves the upgrade of `path` (`…/namespaces/<ns>/pods/<pod>/exec`).
pub async fn serve(
    ctx: Arc<Ctx>,
    user: User,
    path: String,
    q: Vec<(String, String)>,
    req: Request<Incoming>,
) -> Response<Body> {
    let t = match server::target(&path) {
        Some(Ok(t)) if t.resource.name == "pods" && t.subresource == "exec" => t,
        Some(Err(f)) => return respond(f.into()),
        _ => return respond(status::path_not_found().into()),
    };
    let offered = header(&req, "sec-websocket-protocol").to_string();
    let Some(protocol) = PROTOCOLS
        .iter()
        .find(|p| offered.split(',').any(|o| o.trim() == **p))
    else {
        return respond(
            status::bad_request(&format!(
                "unable to upgrade: no supported subprotocol in {offered:?}"
            ))
            .into(),
        );
    };
    let key = header(&req, "sec-websocket-key").to_string();
    let command: Vec<String> = q
        .iter()
        .filter(|(k, _)| k == "command")
        .map(|(_, v)| v.clone())
        .collect();
    let stdin = q
        .iter()
        .any(|(k, v)| k == "stdin" && (v == "true" || v == "1"));
    // Authorization and the pod's node, before upgrading.
    let checked = {
        let ctx = ctx.clone();
        let command = command.clone();
        tokio::task::spawn_blocking(
            move || -> Result<(String, String, String, String, Option<Toolbox>), status::Failure> {
                server::admit(&ctx, &user, &t, "create")?;
                let c = ctx
                    .shared
                    .cluster()
                    .map_err(|e| status::internal(&format!("{e:#}")))?;
                let f = ctx
                    .shared
                    .faults()
                    .map_err(|e| status::internal(&format!("{e:#}")))?;
                let snap = super::store::Snapshot::new(c, f, &ctx.removed);
                let pod = snap.get(t.resource, &t.namespace, &t.name)?;
                let node = pod["spec"]["nodeName"].as_str().unwrap_or("").to_string();
                let image = pod["spec"]["containers"][0]["image"]
                    .as_str()
                    .unwrap_or("")
                    .to_string();
                let toolbox = toolbox_answer(&snap, &pod, &command);
                Ok((t.namespace.clone(), t.name.clone(), node, image, toolbox))
            },
        )
        .await
    };
    let (ns, pod, node, image, toolbox) = match checked {
        Ok(Ok(x)) => x,
        Ok(Err(f)) => return respond(f.into()),
        Err(e) => return respond(status::internal(&format!("exec: {e}")).into()),
    };
    if command.is_empty() {
        return respond(
            status::bad_request("you must specify at least one command for the container").into(),
        );
    }
    if let Some(answer) = toolbox {
        return upgrade_then(req, &key, protocol, move |ws| reply(ws, answer, command));
    }
    let Some(address) = ctx.ssh.addresses.get(&node).cloned() else {
        return respond(status::internal(&format!("pod {pod} is on no known node")).into());
    };
    // The etcd static pods' image, `registry.k8s.io/etcd:TAG`.
    let tag = match image.strip_prefix("registry.k8s.io/etcd:") {
        Some(tag) if ns == "kube-system" && pod.starts_with("etcd-") => tag.to_string(),
        _ => {
            return respond(
                status::internal(&format!(
                    "fleetsim: unsupported: exec in pod {ns}/{pod}: only the etcd static pods' \
                     containers are modelled"
                ))
                .into(),
            );
        }
    };
    let ssh = ctx.ssh.clone();
    upgrade_then(req, &key, protocol, move |ws| async move {
        run(ws, &ssh, &address, &pod, &tag, &command, stdin).await;
    })
}

/// The upgraded connection as a WebSocket.
type Ws = WebSocketStream<TokioIo<hyper::upgrade::Upgraded>>;

/// Answers 101 Switching Protocols and hands the upgraded connection to `then`.
fn upgrade_then<F, Fut>(
    mut req: Request<Incoming>,
    key: &str,
    protocol: &str,
    then: F,
) -> Response<Body>
where
    F: FnOnce(Ws) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let upgrade = hyper::upgrade::on(&mut req);
    let protocol = protocol.to_string();
    tokio::spawn(async move {
        let Ok(upgraded) = upgrade.await else {
            return;
        };
        let ws = WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Server, None).await;
        then(ws).await;
    });
    let mut r = Response::new(
        Empty::<Bytes>::new()
            .map_err(|never| match never {})
            .boxed(),
    );
    *r.status_mut() = hyper::StatusCode::SWITCHING_PROTOCOLS;
    let h = r.headers_mut();
    for (name, value) in [
        ("upgrade", "websocket".to_string()),
        ("connection", "Upgrade".to_string()),
        (
            "sec-websocket-accept",
            tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes()),
        ),
        ("sec-websocket-protocol", protocol),
    ] {
        if let Ok(v) = hyper::header::HeaderValue::from_str(&value) {
            h.insert(name, v);
        }
    }
    r
}

/// What Rook's toolbox answers: its `ceph` talks to the mons over the
/// network, not to anything on its node, so it is answered here from the
/// cluster state (`crate::ceph::toolbox`).
type Toolbox = crate::ceph::toolbox::Answer;

/// The toolbox's answer when `pod` is the toolbox of the fleet's Ceph.
fn toolbox_answer(
    snap: &super::store::Snapshot,
    pod: &serde_json::Value,
    command: &[String],
) -> Option<Toolbox> {
    let spec = snap.cluster.ceph.as_ref()?;
    let (k, v) = crate::ceph::TOOLBOX_LABEL;
    let is_toolbox = pod["metadata"]["labels"][k].as_str() == Some(v)
        && pod["metadata"]["namespace"].as_str() == Some(spec.namespace.as_str());
    if !is_toolbox {
        return None;
    }
    let state = crate::ceph::state(&snap.cluster, &snap.faults, spec, snap.now);
    Some(crate::ceph::toolbox::run(spec, &state, command))
}

/// How long the toolbox's `ceph` takes before its first byte. It is a
/// Python program that the container runtime starts in the pod (a runc
/// exec alone takes tens of milliseconds), and kubectl needs that time:
/// client-go's WebSocket executor (`tools/remotecommand/websocket.go`)
/// creates its streams only after the upgrade, while its read loop already
/// runs. A message for a stream not yet created is discarded, and a close
/// read before then fails every later stream with `error: closed all
/// streams` (`closeAllStreamReaders`). An answer sent the moment the
/// connection is upgraded lost that race on a loaded host (seen: a `pg
/// stat` read through the toolbox failed that way, and fleetctl fell back
/// to Rook's status).
const TOOLBOX_START: std::time::Duration = std::time::Duration::from_millis(100);

/// Sends the toolbox's answer as the kubelet relays a command's streams.
async fn reply<S>(ws: WebSocketStream<S>, answer: Toolbox, command: Vec<String>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    tokio::time::sleep(TOOLBOX_START).await;
    let (mut tx, _rx) = ws.split();
    if !answer.stdout.is_empty() {
        let _ = tx.send(frame(STDOUT, answer.stdout.as_bytes())).await;
    }
    if !answer.stderr.is_empty() {
        let _ = tx.send(frame(STDERR, answer.stderr.as_bytes())).await;
    }
    let _ = tx
        .send(frame(
            ERROR,
            exit_status(answer.code, &command).to_string().as_bytes(),
        ))
        .await;
    close(&mut tx).await;
}

/// The error stream's Status for exit `code` of `command`.
fn exit_status(code: i32, command: &[String]) -> serde_json::Value {
    if code == 0 {
        json!({"metadata": {}, "status": "Success"})
    } else {
        json!({"metadata": {}, "status": "Failure",
               "message": format!("command terminated with non-zero exit code: error executing command {command:?}, exit code {code}"),
               "reason": "NonZeroExitCode",
               "details": {"causes": [{"reason": "ExitCode", "message": code.to_string()}]}})
    }
}

/// Runs the command on the pod's node and relays its streams.
async fn run<S>(
    ws: WebSocketStream<S>,
    ssh: &Ssh,
    address: &str,
    pod: &str,
    tag: &str,
    command: &[String],
    stdin: bool,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let (mut tx, mut rx) = ws.split();
    let remote = format!(
        "{ENTRY_PATH} {} {} -- {}",
        quote(pod),
        quote(tag),
        command
            .iter()
            .map(|w| quote(w))
            .collect::<Vec<_>>()
            .join(" ")
    );
    let child = tokio::process::Command::new("ssh")
        .args([
            "-F",
            "/dev/null",
            "-o",
            "BatchMode=yes",
            "-o",
            "ConnectTimeout=5",
        ])
        .args([
            "-o",
            "KexAlgorithms=curve25519-sha256",
            "-o",
            "StrictHostKeyChecking=yes",
        ])
        .args([
            "-o",
            "GlobalKnownHostsFile=/dev/null",
            "-o",
            "IdentitiesOnly=yes",
            "-o",
            "LogLevel=ERROR",
        ])
        .arg("-o")
        .arg(format!("UserKnownHostsFile={}", ssh.known_hosts.display()))
        .arg("-i")
        .arg(&ssh.identity)
        .args(["-p", &ssh.port.to_string()])
        .arg(format!("root@{address}"))
        .arg("--")
        .arg(remote)
        .stdin(if stdin { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            let status = json!({"metadata": {}, "status": "Failure", "message": format!("error executing command in container: {e}"), "reason": "InternalError", "code": 500});
            let _ = tx.send(frame(ERROR, status.to_string().as_bytes())).await;
            close(&mut tx).await;
            return;
        }
    };
    let mut child_in = child.stdin.take();
    let mut out = child.stdout.take();
    let mut err = child.stderr.take();
    let mut errors = Vec::new();
    let mut buf = vec![0u8; 32 * 1024];
    let mut ebuf = vec![0u8; 8 * 1024];
    loop {
        tokio::select! {
            n = async { match out.as_mut() { Some(o) => o.read(&mut buf).await, None => std::future::pending().await } } => {
                match n {
                    Ok(0) | Err(_) => out = None,
                    Ok(n) => if tx.send(frame(STDOUT, &buf[..n])).await.is_err() { return; },
                }
            }
            n = async { match err.as_mut() { Some(e) => e.read(&mut ebuf).await, None => std::future::pending().await } } => {
                match n {
                    Ok(0) | Err(_) => err = None,
                    Ok(n) => errors.extend_from_slice(&ebuf[..n]),
                }
            }
            m = rx.next() => match m {
                Some(Ok(Message::Binary(b))) => match b.first() {
                    Some(&STDIN) => if let Some(i) = child_in.as_mut() {
                        let _ = i.write_all(&b[1..]).await;
                    },
                    Some(&CLOSE) if b.get(1) == Some(&STDIN) => child_in = None,
                    _ => {}
                },
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => {
                    let _ = child.kill().await;
                    return;
                }
                Some(Ok(_)) => {}
            },
        }
        if out.is_none() && err.is_none() {
            break;
        }
    }
    let code = child.wait().await.ok().and_then(|s| s.code()).unwrap_or(1);
    let mut text = String::from_utf8_lossy(&errors).into_owned();
    let runtime = runtime_error(&mut text, code);
    if !text.is_empty() {
        let _ = tx.send(frame(STDERR, text.as_bytes())).await;
    }
    let status = if let Some(msg) = runtime {
        json!({"metadata": {}, "status": "Failure",
               "message": format!("Internal error occurred: {msg}"),
               "reason": "InternalError",
               "details": {"causes": [{"message": msg}]},
               "code": 500})
    } else {
        exit_status(code, command)
    };
    let _ = tx.send(frame(ERROR, status.to_string().as_bytes())).await;
    close(&mut tx).await;
}

/// The runtime's failure the container entry reported (its last stderr
/// line after `RUNTIME_ERROR`, exit `RUNTIME_ERROR_CODE`), taken out of
/// `stderr`.
fn runtime_error(stderr: &mut String, code: i32) -> Option<String> {
    if code != RUNTIME_ERROR_CODE {
        return None;
    }
    let body = stderr.strip_suffix('\n').unwrap_or(stderr);
    let start = body.rfind('\n').map_or(0, |i| i + 1);
    let msg = body[start..].strip_prefix(RUNTIME_ERROR)?.to_string();
    stderr.truncate(start);
    Some(msg)
}

/// A normal closure (1000): the client reads it as every stream's EOF; a
/// close without a code (1005) is an error to it.
async fn close<T>(tx: &mut T)
where
    T: futures_util::Sink<Message> + Unpin,
{
    let normal = CloseFrame {
        code: CloseCode::Normal,
        reason: "".into(),
    };
    let _ = tx.send(Message::Close(Some(normal))).await;
    let _ = tx.close().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_quoted_for_the_remote_shell() {
        assert_eq!(quote("snapshot"), "'snapshot'");
        assert_eq!(quote("a'b; rm -rf /"), r"'a'\''b; rm -rf /'");
    }

    #[test]
    fn the_runtimes_failure_is_not_the_commands_stderr() {
        let mut text = format!("warning\n{RUNTIME_ERROR}exec: \"sh\": not found\n");
        assert_eq!(
            runtime_error(&mut text, RUNTIME_ERROR_CODE).as_deref(),
            Some("exec: \"sh\": not found")
        );
        assert_eq!(text, "warning\n");
        let mut plain = "Error: x\n".to_string();
        assert_eq!(runtime_error(&mut plain, 1), None);
        assert_eq!(runtime_error(&mut plain, RUNTIME_ERROR_CODE), None);
        assert_eq!(plain, "Error: x\n");
    }

    #[test]
    fn frames_carry_their_stream_first() {
        let Message::Binary(b) = frame(STDOUT, b"hi") else {
            panic!("not binary");
        };
        assert_eq!(&b[..], b"\x01hi");
    }
}
