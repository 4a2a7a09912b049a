//! Kured's settings as its DaemonSet states them: its flags and `KURED_*`
//! environment read the way each Kured release reads them, into where it
//! keeps its lock. Its own file because reading one DaemonSet is one concept,
//! apart from finding which DaemonSet runs Kured.

use std::collections::BTreeMap;

use anyhow::{Context, anyhow, bail};

use crate::remote::kubectl as k;
use crate::steps::lock::listing::{ContainerInfo, DaemonSetInfo, parse_settings};
use crate::steps::lock::{Kubectl, failed};

// Where Kured is found and keeps its lock unless its flags say otherwise;
// the lock itself (kured.rs) is written where discovery found it.
/// Kured's default `--lock-annotation`.
pub const KURED_ANNOTATION: &str = "weave.works/kured-node-lock";
/// Kured's default `--ds-namespace`.
pub const KURED_NAMESPACE: &str = "kube-system";
/// Kured's default `--ds-name`.
pub const KURED_NAME: &str = "kured";

/// The most slots (`--concurrency`) of Kured's lock fleetctl fills. Each
/// entry is about 350 bytes, and the API server refuses an object whose
/// annotations exceed 256 KiB (`TotalAnnotationSizeLimitB` in
/// k8s.io/apimachinery `pkg/api/validation/objectmeta.go`): 256 entries
/// stay well under it. More is a typo, or a Kured told it may reboot every
/// node at once.
pub const MAX_CONCURRENCY: usize = 256;

/// The image's last path component without tag or digest:
/// `ghcr.io/kubereboot/kured:1.23.0` → `kured`.
pub(super) fn image_name(image: &str) -> &str {
    let no_digest = image.split('@').next().unwrap_or(image);
    let last = no_digest.rsplit('/').next().unwrap_or(no_digest);
    last.split(':').next().unwrap_or(last)
}

/// The image's tag as a Kured version, when it is one (`1.23.0`, `v1.9.2`).
pub(super) fn kured_version(image: &str) -> Option<semver::Version> {
    let no_digest = image.split('@').next()?;
    let last = no_digest.rsplit('/').next()?;
    let (_, tag) = last.split_once(':')?;
    semver::Version::parse(tag.trim_start_matches('v')).ok()
}

/// Runs Kured: its command is `…/kured`, or it runs an image named `kured`
/// (whose entrypoint is `/usr/bin/kured`).
pub(super) fn runs_kured(c: &ContainerInfo) -> bool {
    let program = c.command.first().map(|p| p.rsplit('/').next().unwrap_or(p));
    program == Some("kured") || image_name(&c.image) == "kured"
}

/// A Kured that can reboot its node: it shares the node's PID namespace and
/// is privileged, which Kured needs to run its reboot command in PID 1's
/// mount namespace (`/usr/bin/nsenter -m/proc/1/ns/mnt --`,
/// kubereboot/kured `pkg/checkers/checker.go`; `kured-ds.yaml` sets
/// `hostPID: true` "to enter the host mount namespace via init" and
/// `privileged: true` "to nsenter /proc/1/ns/mnt", and so does the Helm
/// chart). Anything else named kured cannot reboot a node, and anyone can
/// create it where they may create pods: it does not count as Kured.
pub(super) fn can_reboot(host_pid: bool, c: &ContainerInfo) -> bool {
    host_pid && c.privileged && runs_kured(c)
}

// ---------------------------------------------------------------------------
// Kured's settings

/// Kured as found: its DaemonSet and the container that runs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KuredInfo {
    pub namespace: String,
    pub name: String,
    pub container: String,
    /// Its position in the pod template, for [`k::get_container_settings`].
    pub index: usize,
    pub image: String,
    /// `command` then `args`, as the kubelet runs them (once read with
    /// [`KuredInfo::read_settings`]; the program alone before).
    pub argv: Vec<String>,
    pub env: BTreeMap<String, Option<String>>,
    pub env_from: bool,
    /// Its pods can reboot their node ([`can_reboot`]).
    pub can_reboot: bool,
}

impl KuredInfo {
    /// The DaemonSet's Kured container, if it has one.
    pub fn from_daemonset(ds: &DaemonSetInfo) -> Option<KuredInfo> {
        let i = ds.containers.iter().position(runs_kured)?;
        Some(KuredInfo::new(ds, i))
    }

    /// The container of a DaemonSet the operator named: the one running
    /// Kured, else one named `kured` (a wrapper command around it).
    pub(super) fn from_named(ds: &DaemonSetInfo, node: &str) -> anyhow::Result<KuredInfo> {
        let i = ds
            .containers
            .iter()
            .position(runs_kured)
            .or_else(|| ds.containers.iter().position(|c| c.name == KURED_NAME));
        let Some(i) = i else {
            let names: Vec<&str> = ds.containers.iter().map(|c| c.name.as_str()).collect();
            bail!(
                "{node}: daemonset {}/{} (named as Kured's) runs no Kured: none of its containers ({}) \
                 runs /usr/bin/kured or a kured image, or is named kured. Name the DaemonSet Kured runs in",
                ds.namespace,
                ds.name,
                names.join(", ")
            );
        };
        Ok(KuredInfo::new(ds, i))
    }

    fn new(ds: &DaemonSetInfo, index: usize) -> KuredInfo {
        let c = &ds.containers[index];
        let mut argv = c.command.clone();
        argv.extend(c.args.iter().cloned());
        KuredInfo {
            namespace: ds.namespace.clone(),
            name: ds.name.clone(),
            container: c.name.clone(),
            index,
            image: c.image.clone(),
            argv,
            env: c.env.clone(),
            env_from: c.env_from,
            can_reboot: can_reboot(ds.host_pid, c),
        }
    }

    /// Reads this container's command, args and env, and only this
    /// container's: what Kured's flags and `KURED_*` variables say.
    pub(super) async fn read_settings<K: Kubectl>(&mut self, api: &K) -> anyhow::Result<()> {
        let label = format!(
            "lock: read the flags and env of Kured's container {} in daemonset {}/{}",
            self.container, self.namespace, self.name
        );
        let out = api
            .kubectl(
                &label,
                &k::get_container_settings(&self.namespace, &self.name, self.index),
                None,
            )
            .await?;
        if !out.success() {
            return Err(failed(api, &label, &out));
        }
        let c = parse_settings(&out.stdout).with_context(|| {
            format!(
                "{}: reading Kured's container in daemonset {}/{}",
                api.node(),
                self.namespace,
                self.name
            )
        })?;
        if c.name != self.container {
            bail!(
                "{}: daemonset {}/{} changed while fleetctl was reading it (container {} is now \
                 `{}`, not {}); retry in a moment",
                api.node(),
                self.namespace,
                self.name,
                self.index,
                c.name,
                self.container
            );
        }
        self.argv = c.command;
        self.argv.extend(c.args);
        self.env = c.env;
        self.env_from = c.env_from;
        Ok(())
    }

    /// Kured's lock settings from this container's flags and env vars, as
    /// the Kured release its image tag names would read them.
    pub fn config(&self) -> anyhow::Result<KuredConfig> {
        let version = kured_version(&self.image);
        let mut warnings = Vec::new();
        let ds_namespace = self
            .setting("ds-namespace", version.as_ref())?
            .unwrap_or_else(|| KURED_NAMESPACE.into());
        let ds_name = self
            .setting("ds-name", version.as_ref())?
            .unwrap_or_else(|| KURED_NAME.into());
        let annotation = self
            .setting("lock-annotation", version.as_ref())?
            .unwrap_or_else(|| KURED_ANNOTATION.into());
        let concurrency = match self.setting("concurrency", version.as_ref())? {
            None => 1,
            Some(raw) => raw.trim().parse::<i64>().map_err(|_| {
                anyhow!(
                    "Kured's daemonset {}/{} sets --concurrency to `{raw}`, which is not a number; \
                     fix Kured's configuration",
                    self.namespace,
                    self.name
                )
            })?,
        };
        if self.env_from && env_rule(version.as_ref()) != EnvRule::Ignored {
            warnings.push(format!(
                "Kured's container in daemonset {}/{} takes environment variables from a configmap or \
                 secret (envFrom), which fleetctl cannot see: if they set KURED_DS_NAMESPACE, \
                 KURED_DS_NAME, KURED_LOCK_ANNOTATION or KURED_CONCURRENCY, Kured locks elsewhere \
                 than fleetctl",
                self.namespace, self.name
            ));
        }
        if version
            .as_ref()
            .is_some_and(|v| *v < semver::Version::new(1, 5, 0))
        {
            warnings.push(format!(
                "Kured {} predates lock TTLs (1.5.0): if this run dies holding its lock, Kured stays \
                 blocked until a fleetctl run with `--force-unlock`",
                self.image
            ));
        }
        let concurrency = usize::try_from(concurrency.max(1)).unwrap_or(usize::MAX);
        if concurrency > MAX_CONCURRENCY {
            bail!(
                "Kured's daemonset {}/{} sets --concurrency to {concurrency}: fleetctl holds Kured \
                 off by taking every slot of its lock, and more than {MAX_CONCURRENCY} entries would \
                 pass the API server's 256 KiB limit on an object's annotations. Lower Kured's \
                 --concurrency",
                self.namespace,
                self.name
            );
        }
        Ok(KuredConfig {
            ds_namespace,
            ds_name,
            annotation,
            concurrency,
            warnings,
        })
    }

    /// One setting: `--flag` and `KURED_FLAG` combined as this Kured
    /// release does; an error when fleetctl cannot know what Kured uses.
    fn setting(
        &self,
        flag: &str,
        version: Option<&semver::Version>,
    ) -> anyhow::Result<Option<String>> {
        let var = format!("KURED_{}", flag.to_uppercase().replace('-', "_"));
        let from_flag = flag_value(&self.argv, flag);
        let Some(from_env) = self.env.get(&var) else {
            return Ok(from_flag);
        };
        let rule = env_rule(version);
        let unreadable = || {
            anyhow!(
                "Kured's daemonset {}/{} sets {var} from a configmap or secret (valueFrom), which \
                 fleetctl cannot read, and Kured {} uses it for --{flag}: set it as a literal value \
                 or pass --{flag} on Kured's command line",
                self.namespace,
                self.name,
                self.image
            )
        };
        match (rule, from_env, from_flag) {
            (EnvRule::Ignored, _, from_flag) => Ok(from_flag),
            (EnvRule::FlagFirst, _, Some(from_flag)) => Ok(Some(from_flag)),
            (EnvRule::FlagFirst | EnvRule::EnvFirst, None, _) => Err(unreadable()),
            (EnvRule::Unknown, None, _) => Err(unreadable()),
            (EnvRule::FlagFirst | EnvRule::EnvFirst, Some(value), _) => Ok(Some(value.clone())),
            (EnvRule::Unknown, Some(value), None) => Ok(Some(value.clone())),
            (EnvRule::Unknown, Some(value), Some(from_flag)) if *value == from_flag => {
                Ok(Some(from_flag))
            }
            (EnvRule::Unknown, Some(value), Some(from_flag)) => bail!(
                "Kured's daemonset {}/{} sets --{flag}={from_flag} and {var}={value}; Kured 1.9 to \
                 1.16 uses the flag, 1.17 and later the variable, and the image {} does not say which \
                 release this is. Make them agree",
                self.namespace,
                self.name,
                self.image
            ),
        }
    }
}

/// How a Kured release combines `KURED_*` env vars with flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum EnvRule {
    /// Before 1.9.0: no env vars.
    Ignored,
    /// 1.9.0 to 1.16.x: an env var fills in a flag not given.
    FlagFirst,
    /// 1.17.0 and later: env vars override flags.
    EnvFirst,
    /// The image tag names no release.
    Unknown,
}

pub(super) fn env_rule(version: Option<&semver::Version>) -> EnvRule {
    match version {
        None => EnvRule::Unknown,
        Some(v) if *v < semver::Version::new(1, 9, 0) => EnvRule::Ignored,
        Some(v) if *v < semver::Version::new(1, 17, 0) => EnvRule::FlagFirst,
        Some(_) => EnvRule::EnvFirst,
    }
}

/// Where and how Kured keeps its lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KuredConfig {
    /// `--ds-namespace` (default kube-system).
    pub ds_namespace: String,
    /// `--ds-name` (default kured).
    pub ds_name: String,
    /// `--lock-annotation` (default weave.works/kured-node-lock).
    pub annotation: String,
    /// `--concurrency` (default 1): above 1 Kured uses the multi-owner form.
    pub concurrency: usize,
    /// What the operator should know about these settings.
    pub warnings: Vec<String>,
}

impl KuredConfig {
    /// `kube-system/kured (annotation weave.works/kured-node-lock)`.
    pub(super) fn target(&self) -> String {
        format!(
            "{}/{} (annotation {})",
            self.ds_namespace, self.ds_name, self.annotation
        )
    }
}

/// The value of `--name=value` or `--name value` in `argv` (the last one
/// wins, as with Kured's flag parser, pflag); flags end at `--`.
pub(super) fn flag_value(argv: &[String], name: &str) -> Option<String> {
    let bare = format!("--{name}");
    let with_eq = format!("--{name}=");
    let mut found = None;
    let mut args = argv.iter();
    while let Some(arg) = args.next() {
        if arg == "--" {
            break;
        }
        if let Some(value) = arg.strip_prefix(&with_eq) {
            found = Some(value.to_string());
        } else if *arg == bare {
            found = args.next().cloned().or(found);
        }
    }
    found
}
