//! The simulated kube-apiserver: the cluster state served over HTTPS to
//! real clients (the real kubectl), as each control plane's kube-apiserver
//! static pod would serve it.
//!
//! - One instance per control plane, listening on that node's address,
//!   port 6443, while its static pods run (`Cluster::static_pods_running`:
//!   its kubelet up for `api_delay`); while the node reboots, the port is
//!   closed (connection refused) and the instance's open connections are
//!   cut, as they are when a real apiserver dies.
//! - The control-plane endpoint, `127.A.B.2:6443` (the fleet's own /24),
//!   plays the load balancer kubeadm's HA guide puts in front: it accepts
//!   while any instance is up and hands each connection to one of them.
//!   admin.conf and every kubelet.conf point at it, as kubeadm points them
//!   at `controlPlaneEndpoint`.
//! - One state: `cluster.json`/`faults.json`, rendered as API objects by
//!   `objects` and served through `store.rs`; the node tools (kubeadm, the
//!   kubelet, Kured) write the same state.
//!
//! The modules: `pki` (certificates, kubeconfigs), `identity` (the user of
//! a client certificate), `auth` (Node, RBAC, NodeRestriction), `server`
//! (TLS, HTTP, routing), `discovery`, `objects` (the object model),
//! `store` (listing, selectors), `metrics`,
//! `write` (updates, patches, deletes), `evict` (the eviction subresource), `patch`, `watch`,
//! `status` (the apiserver's error bodies).

pub mod auth;
pub mod discovery;
pub mod evict;
pub mod exec;
pub mod identity;
pub mod labels;
pub mod metrics;
pub mod objects;
pub mod patch;
pub mod pki;
pub mod proto;
pub mod server;
pub mod status;
pub mod store;
pub mod table;
pub mod watch;
pub mod write;

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use anyhow::{Context, Result};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::sync::watch as signal;

use crate::state::{Role, Shared};

/// How often the manager looks at which control planes serve.
const POLL: Duration = Duration::from_millis(100);

/// What every request handler shares.
pub struct Ctx {
    pub shared: Shared,
    pub removed: store::Removed,
    /// How `pods/exec` reaches a pod's node.
    pub ssh: exec::Ssh,
    /// What every request costs before it is answered: the scenario's
    /// `api_latency`, a real cluster's round trip to the apiserver and etcd.
    pub latency: Duration,
}

/// The instance a connection talks to.
#[derive(Clone)]
pub struct Instance {
    /// The control plane it runs on.
    pub name: String,
    /// `address:port` it serves as (for `/api`'s serverAddress).
    pub address: String,
    stop: signal::Receiver<bool>,
}

/// The control-plane endpoint of a fleet on `127.a.b.0/24`.
pub fn endpoint(a: u8, b: u8) -> Ipv4Addr {
    Ipv4Addr::new(127, a, b, 2)
}

/// A running API server; dropping it stops every instance.
pub struct ApiServer {
    stop: Option<signal::Sender<bool>>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(true);
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn tls_config(pki: &pki::Pki) -> Result<Arc<rustls::ServerConfig>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let ca = CertificateDer::from_pem_slice(pki.ca.cert.as_bytes()).context("parsing the CA")?;
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.clone()).context("trusting the CA")?;
    // A client without a certificate is let through TLS and answered 401,
    // as the apiserver answers an unauthenticated request.
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .allow_unauthenticated()
    .build()
    .context("building the client certificate verifier")?;
    let cert = CertificateDer::from_pem_slice(pki.serving.cert.as_bytes())
        .context("parsing the serving certificate")?;
    let key = PrivateKeyDer::from_pem_slice(pki.serving.key.as_bytes())
        .context("parsing the serving key")?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("choosing TLS versions")?
        .with_client_cert_verifier(verifier)
        .with_single_cert(vec![cert, ca], key)
        .context("loading the serving certificate")?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Starts the API server of a fleet: `members` are the control planes,
/// `endpoint` the control-plane endpoint's address.
pub fn start(
    shared: Shared,
    pki: &pki::Pki,
    members: Vec<(String, Ipv4Addr)>,
    endpoint: Ipv4Addr,
    ssh: exec::Ssh,
) -> Result<ApiServer> {
    let config = tls_config(pki)?;
    let (stop_tx, stop_rx) = signal::channel(false);
    let latency = shared
        .cluster()
        .map(|c| Duration::from_secs_f64(c.api_latency.max(0.0)))
        .unwrap_or_default();
    let ctx = Arc::new(Ctx {
        shared,
        removed: store::Removed::default(),
        ssh,
        latency,
    });
    let thread = thread::Builder::new()
        .name("api-server".into())
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    eprintln!("fleetsim: api server: cannot start its runtime: {e}");
                    return;
                }
            };
            rt.block_on(manage(ctx, config, members, endpoint, stop_rx));
        })
        .context("starting the api server thread")?;
    Ok(ApiServer {
        stop: Some(stop_tx),
        thread: Some(thread),
    })
}

type Serving = Arc<Mutex<Vec<Instance>>>;

/// Opens and closes the instances as their control planes' static pods
/// start and stop, until told to stop.
async fn manage(
    ctx: Arc<Ctx>,
    config: Arc<rustls::ServerConfig>,
    members: Vec<(String, Ipv4Addr)>,
    endpoint: Ipv4Addr,
    mut stop: signal::Receiver<bool>,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    // An instance serves (through the endpoint) while its static pods run;
    // its own address listens only while no `apiserver_unreachable` fault
    // cuts it off. Each has its own stop signal, which also cuts the
    // connections it accepted.
    let mut running: BTreeMap<String, signal::Sender<bool>> = BTreeMap::new();
    let mut direct: BTreeMap<String, signal::Sender<bool>> = BTreeMap::new();
    let mut lb: Option<signal::Sender<bool>> = None;
    let serving: Serving = Arc::new(Mutex::new(Vec::new()));
    let mut ready_before: Option<BTreeMap<String, &'static str>> = None;
    loop {
        let shared = ctx.shared.clone();
        let looked = tokio::task::spawn_blocking(move || {
            let c = shared.cluster()?;
            let cut = shared
                .faults()
                .map(|f| f.apiserver_unreachable)
                .unwrap_or_default();
            anyhow::Ok((c, cut))
        })
        .await;
        let (up, cut): (Vec<String>, Vec<String>) = match looked {
            Ok(Ok((c, cut))) => {
                let now = crate::state::now();
                let ready = objects::nodes::ready_statuses(&c, now);
                if ready_before.as_ref().is_some_and(|b| *b != ready) {
                    let shared = ctx.shared.clone();
                    let bumped = tokio::task::spawn_blocking(move || {
                        shared.update_cluster(|c| {
                            c.resource_version += 1;
                            Ok(())
                        })
                    })
                    .await;
                    if !matches!(bumped, Ok(Ok(()))) {
                        eprintln!("fleetsim: api server: cannot record a node's new Ready status");
                    }
                }
                ready_before = Some(ready);
                let up = members
                    .iter()
                    .filter(|(n, _)| {
                        c.nodes.get(n).is_some_and(|x| x.role == Role::ControlPlane)
                            && c.static_pods_running(n, now)
                    })
                    .map(|(n, _)| n.clone())
                    .collect();
                (up, cut)
            }
            _ => (
                running.keys().cloned().collect(),
                direct_cut(&running, &direct),
            ),
        };
        for (name, addr) in &members {
            let want = up.contains(name);
            if !want && let Some(tx) = running.remove(name) {
                let _ = tx.send(true);
                eprintln!("fleetsim: api server on {name} stopped");
            }
            if want && !running.contains_key(name) {
                let (tx, _) = signal::channel(false);
                running.insert(name.clone(), tx);
            }
            let listen = want && !cut.contains(name);
            if !listen && let Some(tx) = direct.remove(name) {
                let _ = tx.send(true);
            }
            if listen && !direct.contains_key(name) {
                let sock = SocketAddr::V4(SocketAddrV4::new(*addr, pki::PORT));
                match bind(sock) {
                    Ok(listener) => {
                        let (tx, rx) = signal::channel(false);
                        let inst = Instance {
                            name: name.clone(),
                            address: sock.to_string(),
                            stop: rx,
                        };
                        tokio::spawn(accept(
                            ctx.clone(),
                            acceptor.clone(),
                            listener,
                            Pick::One(inst),
                        ));
                        direct.insert(name.clone(), tx);
                        eprintln!("fleetsim: api server on {name} listening on {sock}");
                    }
                    Err(e) => {
                        eprintln!("fleetsim: api server on {name}: cannot listen on {sock}: {e:#}")
                    }
                }
            }
        }
        if let Ok(mut s) = serving.lock() {
            s.retain(|i| running.contains_key(&i.name));
            for name in running.keys() {
                if !s.iter().any(|i| &i.name == name)
                    && let (Some((_, addr)), Some(tx)) =
                        (members.iter().find(|(n, _)| n == name), running.get(name))
                {
                    s.push(Instance {
                        name: name.clone(),
                        address: SocketAddrV4::new(*addr, pki::PORT).to_string(),
                        stop: tx.subscribe(),
                    });
                }
            }
        }
        match (&lb, running.is_empty()) {
            (Some(_), true) => {
                if let Some(tx) = lb.take() {
                    let _ = tx.send(true);
                }
            }
            (None, false) => {
                let sock = SocketAddr::V4(SocketAddrV4::new(endpoint, pki::PORT));
                match bind(sock) {
                    Ok(listener) => {
                        let (tx, rx) = signal::channel(false);
                        tokio::spawn(accept(
                            ctx.clone(),
                            acceptor.clone(),
                            listener,
                            Pick::Any(serving.clone(), rx),
                        ));
                        lb = Some(tx);
                    }
                    Err(e) => eprintln!(
                        "fleetsim: control-plane endpoint: cannot listen on {sock}: {e:#}"
                    ),
                }
            }
            _ => {}
        }
        tokio::select! {
            _ = stop.changed() => break,
            _ = tokio::time::sleep(POLL) => {}
        }
    }
    for (_, tx) in running.into_iter().chain(direct) {
        let _ = tx.send(true);
    }
    if let Some(tx) = lb {
        let _ = tx.send(true);
    }
}

/// The instances that run but do not listen on their own address: what
/// the last look decided, kept when the state cannot be read.
fn direct_cut(
    running: &BTreeMap<String, signal::Sender<bool>>,
    direct: &BTreeMap<String, signal::Sender<bool>>,
) -> Vec<String> {
    running
        .keys()
        .filter(|n| !direct.contains_key(*n))
        .cloned()
        .collect()
}

fn bind(sock: SocketAddr) -> Result<tokio::net::TcpListener> {
    let l = std::net::TcpListener::bind(sock).with_context(|| format!("binding {sock}"))?;
    l.set_nonblocking(true)
        .context("setting the listener non-blocking")?;
    tokio::net::TcpListener::from_std(l).context("registering the listener")
}

/// Whom a listener's connections talk to: its own instance, or (the
/// endpoint) any instance up when the connection comes.
enum Pick {
    One(Instance),
    Any(Serving, signal::Receiver<bool>),
}

async fn accept(
    ctx: Arc<Ctx>,
    acceptor: tokio_rustls::TlsAcceptor,
    listener: tokio::net::TcpListener,
    pick: Pick,
) {
    let mut stop = match &pick {
        Pick::One(i) => i.stop.clone(),
        Pick::Any(_, s) => s.clone(),
    };
    let mut turn = 0usize;
    loop {
        let conn = tokio::select! {
            _ = stop.changed() => return,
            c = listener.accept() => c,
        };
        let Ok((tcp, _)) = conn else {
            continue;
        };
        let inst = match &pick {
            Pick::One(i) => Some(i.clone()),
            Pick::Any(serving, _) => serving.lock().ok().and_then(|s| {
                turn = turn.wrapping_add(1);
                (!s.is_empty()).then(|| s[turn % s.len()].clone())
            }),
        };
        let Some(inst) = inst else {
            continue;
        };
        tokio::spawn(connection(ctx.clone(), acceptor.clone(), tcp, inst));
    }
}

async fn connection(
    ctx: Arc<Ctx>,
    acceptor: tokio_rustls::TlsAcceptor,
    tcp: tokio::net::TcpStream,
    inst: Instance,
) {
    let mut stop = inst.stop.clone();
    if *stop.borrow() {
        return;
    }
    let tls = tokio::select! {
        _ = stop.changed() => return,
        t = acceptor.accept(tcp) => match t {
            Ok(t) => t,
            Err(_) => return,
        },
    };
    let user = tls
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|c| c.first())
        .and_then(|c| identity::from_certificate(c));
    let svc = {
        let inst = inst.clone();
        service_fn(move |req| server::handle(ctx.clone(), inst.clone(), user.clone(), req))
    };
    let conn = hyper::server::conn::http1::Builder::new()
        .serve_connection(TokioIo::new(tls), svc)
        .with_upgrades();
    tokio::select! {
        _ = stop.changed() => {}
        _ = conn => {}
    }
}
