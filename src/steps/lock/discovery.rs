//! Finding Kured: which DaemonSet runs it, in whatever namespace its
//! manifest or Helm release put it, and where its flags and `KURED_*`
//! environment put its lock (see `kured.rs` for what this relies on in
//! Kured's releases).

use anyhow::{Context, bail};

use super::listing::{Marker, parse_daemonsets, parse_pods};
use super::{Kubectl, LockOptions, failed};
use crate::remote::kubectl as k;

mod kured_settings;
pub use kured_settings::{
    KURED_ANNOTATION, KURED_NAME, KURED_NAMESPACE, KuredConfig, KuredInfo, MAX_CONCURRENCY,
};
use kured_settings::{can_reboot, runs_kured};

// ---------------------------------------------------------------------------
// Finding Kured

/// Where the lock must go.
pub(super) enum Found {
    Kured(Box<FoundKured>),
    /// No Kured DaemonSet or pod anywhere: fleetctl's own lock, with what
    /// the operator should know (look-alikes that cannot reboot a node).
    Nowhere {
        warnings: Vec<String>,
    },
}

pub(super) struct FoundKured {
    pub(super) kured: KuredInfo,
    pub(super) config: KuredConfig,
    /// "Kured runs as daemonset kured/kured"
    pub(super) how: String,
    pub(super) warnings: Vec<String>,
}

/// Looks at every DaemonSet for Kured (or at the one `opts.kured` names);
/// with none, at every pod, so Kured run some other way is not mistaken for
/// no Kured.
pub(super) async fn find<K: Kubectl>(api: &K, opts: &LockOptions) -> anyhow::Result<Found> {
    let all = read_listing(
        api,
        "lock: find Kured (the containers of every DaemonSet)",
        k::list_daemonsets,
        parse_daemonsets,
        "the DaemonSets",
    )
    .await?;
    let (mut kureds, lookalikes): (Vec<KuredInfo>, Vec<KuredInfo>) = all
        .iter()
        .filter_map(KuredInfo::from_daemonset)
        .partition(|k| k.can_reboot);
    // A named DaemonSet is the operator's word, whatever its pods may do.
    if let Some(named) = &opts.kured {
        kureds.extend(
            lookalikes
                .iter()
                .filter(|k| k.namespace == named.namespace && k.name == named.name)
                .cloned(),
        );
    }
    // The image is anyone's text (quoted: no control character reaches the
    // terminal); namespaces and names are DNS names the API server checked.
    let mut ignored: Vec<String> = lookalikes
        .iter()
        .filter(|k| {
            !kureds
                .iter()
                .any(|n| n.namespace == k.namespace && n.name == k.name)
        })
        .map(|k| {
            format!(
                "daemonset {}/{} runs image {:?} but its pods cannot reboot a node (Kured \
                 needs hostPID and a privileged container): not taken for Kured. If it is \
                 your Kured, name it with `kured: {}/{}` in the inventory",
                k.namespace, k.name, k.image, k.namespace, k.name
            )
        })
        .collect();
    // Only Kured's own container's flags and environment are read.
    for kured in &mut kureds {
        kured.read_settings(api).await?;
    }
    let (kured, how) = match &opts.kured {
        Some(named) => {
            let Some(ds) = all
                .iter()
                .find(|ds| ds.namespace == named.namespace && ds.name == named.name)
            else {
                let found: Vec<String> = kureds
                    .iter()
                    .map(|k| format!("{}/{}", k.namespace, k.name))
                    .collect();
                let seen = if found.is_empty() {
                    "no DaemonSet runs Kured".to_string()
                } else {
                    format!("Kured runs as {}", found.join(", "))
                };
                bail!(
                    "{}: there is no daemonset {named}, named as Kured's (inventory `kured:` or --kured); \
                     {seen}. Fix the name, or leave it out to let fleetctl find Kured",
                    api.node()
                );
            };
            let kured = match kureds
                .iter()
                .find(|k| k.namespace == named.namespace && k.name == named.name)
            {
                Some(found) => found.clone(),
                None => {
                    let mut wrapper = KuredInfo::from_named(ds, api.node())?;
                    wrapper.read_settings(api).await?;
                    wrapper
                }
            };
            (kured, format!("Kured named as daemonset {named}"))
        }
        None => match kureds.as_slice() {
            [] => {
                ignored.extend(refuse_kured_pods(api).await?);
                return Ok(Found::Nowhere { warnings: ignored });
            }
            [one] => {
                let how = format!("Kured runs as daemonset {}/{}", one.namespace, one.name);
                (one.clone(), how)
            }
            several => bail!(
                "{}: Kured runs as {} DaemonSets that can each reboot nodes: {}. fleetctl will not \
                 guess which one's lock keeps Kured away: name it with `kured: NAMESPACE/NAME` in the \
                 inventory (or `--kured NAMESPACE/NAME`)",
                api.node(),
                several.len(),
                several
                    .iter()
                    .map(|k| match k.config() {
                        Ok(c) => format!("{}/{} (lock on {})", k.namespace, k.name, c.target()),
                        Err(_) => format!("{}/{}", k.namespace, k.name),
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        },
    };
    let config = kured.config().with_context(|| {
        format!(
            "{}: reading Kured's lock settings in daemonset {}/{}; fleetctl does not take its own \
             lock while Kured runs, as Kured would not see it",
            api.node(),
            kured.namespace,
            kured.name
        )
    })?;
    let mut warnings = config.warnings.clone();
    warnings.append(&mut ignored);
    // An operator-named Kured: any other Kured that locks elsewhere is not
    // held back by this lock.
    for other in &kureds {
        if other.namespace == kured.namespace && other.name == kured.name {
            continue;
        }
        let elsewhere = match other.config() {
            Ok(c) => {
                (&c.ds_namespace, &c.ds_name, &c.annotation)
                    != (&config.ds_namespace, &config.ds_name, &config.annotation)
            }
            Err(_) => true,
        };
        if elsewhere {
            warnings.push(format!(
                "Kured also runs as daemonset {}/{}, which does not keep its lock on {}: \
                 that Kured is not held back and may reboot nodes while apply runs",
                other.namespace,
                other.name,
                config.target()
            ));
        }
    }
    Ok(Found::Kured(Box::new(FoundKured {
        kured,
        config,
        how,
        warnings,
    })))
}

/// Runs a listing (`query`) whose fields a fresh [`Marker`] separates, and
/// parses what it printed; `what` names what was listed, for the error.
async fn read_listing<K: Kubectl, T>(
    api: &K,
    label: &str,
    query: fn(&str) -> k::ListingQuery,
    parse: fn(&str, &Marker) -> anyhow::Result<T>,
    what: &str,
) -> anyhow::Result<T> {
    let marker = Marker::new()?;
    let query = query(marker.as_str());
    let out = api
        .kubectl(label, &query.args, Some(&query.template))
        .await?;
    if !out.success() {
        return Err(failed(api, label, &out));
    }
    parse(&out.stdout, &marker)
        .with_context(|| format!("{}: reading {what} to find Kured", api.node()))
}

/// No DaemonSet runs Kured: fails if a pod that can reboot its node runs
/// it anyway (a Deployment, a static pod), since its lock's place is then
/// unknown. Pods that merely look like Kured (an image called `kured` in a
/// namespace where someone may create pods) cannot reboot a node and do
/// not block apply: they are returned, described, as warnings.
async fn refuse_kured_pods<K: Kubectl>(api: &K) -> anyhow::Result<Vec<String>> {
    let pods = read_listing(
        api,
        "lock: no Kured DaemonSet; look for Kured pods",
        k::list_pods,
        parse_pods,
        "the pods",
    )
    .await?;
    let name = |p: &super::listing::PodInfo| {
        if p.owner.is_empty() {
            format!("{}/{}", p.namespace, p.name)
        } else {
            format!("{}/{} (owned by a {})", p.namespace, p.name, p.owner)
        }
    };
    let kured: Vec<String> = pods
        .iter()
        .filter(|p| p.containers.iter().any(|c| can_reboot(p.host_pid, c)))
        .map(name)
        .collect();
    if kured.is_empty() {
        let lookalikes: Vec<String> = pods
            .iter()
            .filter(|p| p.containers.iter().any(runs_kured))
            .map(name)
            .collect();
        if lookalikes.is_empty() {
            return Ok(Vec::new());
        }
        let shown = lookalikes.len().min(5);
        return Ok(vec![format!(
            "pod {}{} runs Kured's program or image but cannot reboot a node (Kured needs \
             hostPID and a privileged container): not taken for Kured",
            lookalikes[..shown].join(", "),
            if lookalikes.len() > shown {
                format!(" and {} more", lookalikes.len() - shown)
            } else {
                String::new()
            }
        )]);
    }
    bail!(
        "{}: Kured runs in pod {} but in no DaemonSet, so fleetctl cannot tell where it keeps its \
         reboot lock, and its own lock would not stop it. Name the DaemonSet Kured locks with \
         `kured: NAMESPACE/NAME` in the inventory (or `--kured NAMESPACE/NAME`), or stop that \
         Kured while applying",
        api.node(),
        kured.join(", ")
    )
}

#[cfg(test)]
mod tests;
