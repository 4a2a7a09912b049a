//! Finding Kured against Kured's real manifests and flag rules, with the
//! fake API server.

use super::*;
use crate::steps::lock::lock_testkit::*;
use crate::steps::lock::{KuredRef, LockOptions, acquire, kured_lock_value};

const TTL: std::time::Duration = std::time::Duration::from_secs(15 * 60);

fn container(command: &[&str], args: &[&str], image: &str) -> ContainerInfo {
    ContainerInfo {
        name: "kured".into(),
        image: image.into(),
        command: strings(command),
        args: strings(args),
        ..ContainerInfo::default()
    }
}

fn info(argv: &[&str], env: &[(&str, &str)], image: &str) -> KuredInfo {
    KuredInfo {
        namespace: "kured".into(),
        name: "kured".into(),
        container: "kured".into(),
        index: 0,
        image: image.into(),
        argv: strings(argv),
        env: env
            .iter()
            .map(|(k, v)| (k.to_string(), Some(v.to_string())))
            .collect(),
        env_from: false,
        can_reboot: true,
    }
}

const IMAGE: &str = "ghcr.io/kubereboot/kured:1.23.0";

// ---------------------------------------------------------------------------
// Which containers run Kured

#[test]
fn kured_is_recognised_by_its_command_or_its_image() {
    let cases = [
        (
            container(&["/usr/bin/kured"], &[], "registry.local/mirror/reboots:7"),
            true,
        ),
        (container(&[], &["--period=1h"], IMAGE), true),
        (container(&[], &[], "docker.io/weaveworks/kured"), true),
        (
            container(&[], &[], "ghcr.io/kubereboot/kured@sha256:4f2a"),
            true,
        ),
        (container(&[], &[], "localhost:5000/kured:dev"), true),
        (container(&["kured"], &[], "busybox"), true),
        (
            container(&[], &[], "ghcr.io/kubereboot/kured-exporter:1"),
            false,
        ),
        (
            container(&["/bin/sh", "-c", "/usr/bin/kured"], &[], "busybox"),
            false,
        ),
        (container(&[], &[], "quay.io/cilium/cilium:v1.18.1"), false),
    ];
    for (c, want) in cases {
        assert_eq!(runs_kured(&c), want, "{c:?}");
    }
    assert_eq!(kured_version(IMAGE), Some(semver::Version::new(1, 23, 0)));
    assert_eq!(
        kured_version("docker.io/weaveworks/kured:v1.9.2"),
        Some(semver::Version::new(1, 9, 2))
    );
    assert_eq!(kured_version("localhost:5000/kured"), None);
    assert_eq!(kured_version("ghcr.io/kubereboot/kured@sha256:4f2a"), None);
    assert_eq!(kured_version("ghcr.io/kubereboot/kured:main"), None);
}

// ---------------------------------------------------------------------------
// Kured's flags and env vars, as each release reads them

#[test]
fn kured_defaults_without_flags() {
    let config = info(&["/usr/bin/kured"], &[], IMAGE).config().unwrap();
    assert_eq!(
        config,
        KuredConfig {
            ds_namespace: "kube-system".into(),
            ds_name: "kured".into(),
            annotation: "weave.works/kured-node-lock".into(),
            concurrency: 1,
            warnings: Vec::new(),
        }
    );
}

#[test]
fn kured_flags_in_both_forms_last_one_wins_and_dash_dash_ends_them() {
    let argv = [
        "/usr/bin/kured",
        "--ds-name=first",
        "--period",
        "1h",
        "--ds-namespace",
        "kured",
        "--force-reboot",
        "--lock-annotation=example.com/lock",
        "--concurrency",
        "3",
        "--ds-name",
        "kured-lock",
        "--",
        "--ds-name=ignored",
    ];
    let config = info(&argv, &[], IMAGE).config().unwrap();
    assert_eq!(config.ds_name, "kured-lock");
    assert_eq!(config.ds_namespace, "kured");
    assert_eq!(config.annotation, "example.com/lock");
    assert_eq!(config.concurrency, 3);
}

#[test]
fn env_vars_count_as_the_kured_release_in_the_image_tag_counts_them() {
    let argv = ["/usr/bin/kured", "--ds-name=from-flag"];
    let env = [("KURED_DS_NAME", "from-env"), ("KURED_CONCURRENCY", "2")];
    let ds_name = |image: &str| info(&argv, &env, image).config().map(|c| c.ds_name);
    let concurrency = |image: &str| info(&argv, &env, image).config().unwrap().concurrency;
    // 1.17 and later: env vars after the flags.
    assert_eq!(ds_name(IMAGE).unwrap(), "from-env");
    assert_eq!(concurrency(IMAGE), 2);
    // 1.9 to 1.16: only for flags not given.
    assert_eq!(
        ds_name("ghcr.io/kubereboot/kured:1.16.2").unwrap(),
        "from-flag"
    );
    assert_eq!(concurrency("ghcr.io/kubereboot/kured:1.16.2"), 2);
    // Before 1.9: never.
    assert_eq!(
        ds_name("docker.io/weaveworks/kured:1.8.2").unwrap(),
        "from-flag"
    );
    assert_eq!(concurrency("docker.io/weaveworks/kured:1.8.2"), 1);
    // No release in the tag: fine while they agree, refused when they do not.
    let err = ds_name("ghcr.io/kubereboot/kured@sha256:4f2a").unwrap_err();
    assert_eq!(
        err.to_string(),
        "Kured's daemonset kured/kured sets --ds-name=from-flag and KURED_DS_NAME=from-env; Kured 1.9 \
         to 1.16 uses the flag, 1.17 and later the variable, and the image \
         ghcr.io/kubereboot/kured@sha256:4f2a does not say which release this is. Make them agree"
    );
    let agree = info(
        &argv,
        &[("KURED_DS_NAME", "from-flag")],
        "ghcr.io/kubereboot/kured@sha256:4f2a",
    );
    assert_eq!(agree.config().unwrap().ds_name, "from-flag");
}

#[test]
fn a_setting_kured_takes_from_a_secret_cannot_be_read_and_is_refused() {
    let mut kured = info(&["/usr/bin/kured"], &[], IMAGE);
    kured.env.insert("KURED_LOCK_ANNOTATION".into(), None);
    let err = kured.config().unwrap_err();
    assert_eq!(
        err.to_string(),
        "Kured's daemonset kured/kured sets KURED_LOCK_ANNOTATION from a configmap or secret \
         (valueFrom), which fleetctl cannot read, and Kured ghcr.io/kubereboot/kured:1.23.0 uses it \
         for --lock-annotation: set it as a literal value or pass --lock-annotation on Kured's command line"
    );
    // Kured 1.9–1.16 ignores it when the flag is given.
    kured.argv.push("--lock-annotation=example.com/lock".into());
    kured.image = "ghcr.io/kubereboot/kured:1.14.0".into();
    assert_eq!(kured.config().unwrap().annotation, "example.com/lock");
    // An unrelated secret (the node id, a webhook) is none of the lock's business.
    let mut kured = info(&["/usr/bin/kured"], &[], IMAGE);
    kured.env.insert("KURED_NOTIFY_URL".into(), None);
    kured.env.insert("KURED_NODE_ID".into(), None);
    assert!(kured.config().is_ok());
}

#[test]
fn env_from_and_pre_ttl_releases_are_warned_about() {
    let mut kured = info(&["/usr/bin/kured"], &[], IMAGE);
    kured.env_from = true;
    let warnings = kured.config().unwrap().warnings;
    assert_eq!(warnings.len(), 1);
    assert!(
        warnings[0].contains("(envFrom), which fleetctl cannot see"),
        "{warnings:?}"
    );
    let old = info(&["/usr/bin/kured"], &[], "docker.io/weaveworks/kured:1.4.5");
    let warnings = old.config().unwrap().warnings;
    assert_eq!(
        warnings,
        [
            "Kured docker.io/weaveworks/kured:1.4.5 predates lock TTLs (1.5.0): if this apply dies \
          holding its lock, Kured stays blocked until `fleetctl apply --force-unlock`"
        ]
    );
}

#[test]
fn a_non_numeric_concurrency_is_reported_and_zero_means_one() {
    let err = info(&["--concurrency=two"], &[], IMAGE)
        .config()
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "Kured's daemonset kured/kured sets --concurrency to `two`, which is not a number; fix Kured's \
         configuration"
    );
    assert_eq!(
        info(&["--concurrency=0"], &[], IMAGE)
            .config()
            .unwrap()
            .concurrency,
        1
    );
}

// ---------------------------------------------------------------------------
// Finding Kured

/// Kured as its Helm chart installs it: release `kured` in namespace
/// `kured` (`--ds-name`/`--ds-namespace` from the release).
fn helm_kured() -> Api {
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

#[tokio::test]
async fn kured_is_found_in_the_namespace_its_helm_release_put_it_in() {
    let api = helm_kured();
    let lock = acquire(&api, &LockOptions::default(), &me(), at(NOW))
        .await
        .unwrap();
    assert_eq!(
        lock.describe(),
        "Kured's reboot lock on daemonset kured/kured (annotation weave.works/kured-node-lock); \
         Kured runs as daemonset kured/kured"
    );
    assert_eq!(
        api.verbs(),
        [
            "get daemonsets",
            "get daemonset",
            "get daemonset",
            "annotate daemonset"
        ]
    );
    let value = api
        .state()
        .annotation("kured", "kured", KURED_ANNOTATION)
        .unwrap();
    assert_eq!(
        value,
        kured_lock_value(&me(), at(NOW), at(NOW), TTL, 1).unwrap()
    );
    assert!(
        api.state().configmaps.is_empty(),
        "never fleetctl's own lock"
    );
    assert!(lock.warnings().is_empty(), "{:?}", lock.warnings());
    assert_eq!(
        api.note_detail("lock-acquired"),
        "Kured's reboot lock on daemonset kured/kured (annotation weave.works/kured-node-lock) taken \
         by fleetctl/alice@laptop (pid 4242 on laptop), TTL 15m; Kured runs as daemonset kured/kured"
    );
}

#[tokio::test]
async fn a_helm_release_with_another_name_and_an_image_only_container_is_found_too() {
    let api = Api::default();
    let mut kured = Container::kured(&["--ds-name=night-kured", "--ds-namespace=ops"]);
    kured.name = "kured".into();
    kured.command.clear(); // the image's entrypoint is /usr/bin/kured
    api.add_ds("ops", "night-kured", vec![kured]);
    let lock = acquire(&api, &LockOptions::default(), &me(), at(NOW))
        .await
        .unwrap();
    assert!(
        api.state()
            .annotation("ops", "night-kured", KURED_ANNOTATION)
            .is_some()
    );
    assert!(
        lock.describe()
            .ends_with("Kured runs as daemonset ops/night-kured")
    );
}

#[tokio::test]
async fn several_kured_daemonsets_are_refused_unless_one_is_named() {
    let api = helm_kured();
    api.add_ds(
        "kube-system",
        "kured",
        vec![Container::kured(&["--lock-annotation=example.com/lock"])],
    );
    let err = acquire(&api, &LockOptions::default(), &me(), at(NOW))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "cp-1: Kured runs as 2 DaemonSets that can each reboot nodes: kube-system/kured (lock on \
         kube-system/kured (annotation example.com/lock)), kured/kured (lock on kured/kured \
         (annotation weave.works/kured-node-lock)). fleetctl will not guess which one's lock keeps \
         Kured away: name it with `kured: NAMESPACE/NAME` in the inventory (or `--kured \
         NAMESPACE/NAME`)"
    );
    assert_eq!(
        api.verbs(),
        ["get daemonsets", "get daemonset", "get daemonset"],
        "each Kured's own settings read, nothing written"
    );

    let named = LockOptions {
        kured: Some("kured/kured".parse().unwrap()),
        ..LockOptions::default()
    };
    let lock = acquire(&api, &named, &me(), at(NOW)).await.unwrap();
    assert!(
        lock.describe()
            .ends_with("Kured named as daemonset kured/kured")
    );
    assert!(
        api.state()
            .annotation("kured", "kured", KURED_ANNOTATION)
            .is_some()
    );
    assert_eq!(
        lock.warnings(),
        [
            "Kured also runs as daemonset kube-system/kured, which does not keep its lock on kured/kured \
          (annotation weave.works/kured-node-lock): that Kured is not held back and may reboot nodes \
          while apply runs"
        ]
    );
}

#[tokio::test]
async fn a_named_kured_that_is_not_there_or_runs_no_kured_is_refused() {
    let api = helm_kured();
    let named = |r: &str| LockOptions {
        kured: Some(r.parse().unwrap()),
        ..LockOptions::default()
    };
    let err = acquire(&api, &named("kube-system/kured"), &me(), at(NOW))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "cp-1: there is no daemonset kube-system/kured, named as Kured's (inventory `kured:` or \
         --kured); Kured runs as kured/kured. Fix the name, or leave it out to let fleetctl find Kured"
    );
    let err = acquire(&api, &named("kube-system/cilium"), &me(), at(NOW))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "cp-1: daemonset kube-system/cilium (named as Kured's) runs no Kured: none of its containers \
         (cilium-agent) runs /usr/bin/kured or a kured image, or is named kured. Name the DaemonSet \
         Kured runs in"
    );
    assert!(api.state().configmaps.is_empty());
}

#[tokio::test]
async fn a_named_kured_in_a_wrapper_container_called_kured_is_used() {
    let api = Api::default();
    let mut wrapped = Container::kured(&["--ds-namespace=ops"]);
    wrapped.command = strings(&["/bin/sh", "-c", "exec /opt/kured \"$@\"", "--"]);
    wrapped.image = "registry.local/tools:4".into();
    api.add_ds("ops", "reboots", vec![wrapped]);
    api.add_ds("kube-system", "kured", Vec::new());
    let named = LockOptions {
        kured: Some("ops/reboots".parse().unwrap()),
        ..LockOptions::default()
    };
    let lock = acquire(&api, &named, &me(), at(NOW)).await.unwrap();
    // Kured's flags put the lock on kube-system/kured (default --ds-name).
    assert!(lock.describe().starts_with(
        "Kured's reboot lock on daemonset kube-system/kured (annotation weave.works/kured-node-lock)"
    ));
}

#[tokio::test]
async fn kured_pods_without_a_daemonset_are_refused_rather_than_ignored() {
    let api = Api::default();
    api.state().pods.push((
        "reboots".into(),
        "kured-5d8c7b-q2x9z".into(),
        vec![Container::kured(&[])],
    ));
    let err = acquire(&api, &LockOptions::default(), &me(), at(NOW))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "cp-1: Kured runs in pod reboots/kured-5d8c7b-q2x9z but in no DaemonSet, so fleetctl cannot \
         tell where it keeps its reboot lock, and its own lock would not stop it. Name the DaemonSet \
         Kured locks with `kured: NAMESPACE/NAME` in the inventory (or `--kured NAMESPACE/NAME`), or \
         stop that Kured while applying"
    );
    assert_eq!(api.verbs(), ["get daemonsets", "get pods"]);
    assert!(api.state().configmaps.is_empty());
}

#[tokio::test]
async fn kured_whose_lock_cannot_be_held_stops_apply_and_never_falls_back() {
    // Kured's flags name a lock DaemonSet that does not exist.
    let api = Api::with_kured(&["--ds-name=gone"]);
    let err = acquire(&api, &LockOptions::default(), &me(), at(NOW))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "cp-1: Kured (daemonset kube-system/kured) keeps its reboot lock on daemonset kube-system/gone \
         (--ds-namespace/--ds-name), which does not exist, so Kured cannot lock either; fix Kured's \
         flags before applying"
    );
    // Kured's settings cannot be read.
    let api = Api::with_kured(&["--concurrency=two"]);
    let err = acquire(&api, &LockOptions::default(), &me(), at(NOW))
        .await
        .unwrap_err();
    assert_eq!(
        format!("{err:#}"),
        "cp-1: reading Kured's lock settings in daemonset kube-system/kured; fleetctl does not take its \
         own lock while Kured runs, as Kured would not see it: Kured's daemonset kube-system/kured sets \
         --concurrency to `two`, which is not a number; fix Kured's configuration"
    );
    assert_eq!(api.verbs(), ["get daemonsets", "get daemonset"]);
    // kubectl may not read the lock.
    struct Forbidden(Api);
    impl Kubectl for Forbidden {
        async fn kubectl(
            &self,
            label: &str,
            args: &[String],
            stdin: Option<&str>,
        ) -> anyhow::Result<crate::ssh::Output> {
            let reads_lock = args.iter().any(|a| a.contains("{.metadata.annotations."));
            if args.iter().any(|a| a == "daemonset") && reads_lock {
                return Ok(fail(
                    r#"Error from server (Forbidden): daemonsets.apps "kured" is forbidden: User "kubernetes-admin" cannot get resource "daemonsets""#,
                ));
            }
            self.0.kubectl(label, args, stdin).await
        }
        fn note(&self, kind: &str, detail: &str) {
            self.0.note(kind, detail)
        }
        fn node(&self) -> &str {
            "cp-1"
        }
    }
    let api = Forbidden(Api::with_kured(&[]));
    let err = acquire(&api, &LockOptions::default(), &me(), at(NOW))
        .await
        .unwrap_err();
    assert!(
        err.to_string().starts_with(
            "cp-1: lock: read annotation weave.works/kured-node-lock of daemonset kube-system/kured failed"
        ),
        "{err}"
    );
    assert!(api.0.state().configmaps.is_empty());
}

#[tokio::test]
async fn the_fake_api_prints_listings_the_parser_reads() {
    let api = helm_kured();
    let marker = Marker::new().unwrap();
    let out = api
        .kubectl(
            "",
            &crate::remote::kubectl::list_daemonsets(marker.as_str()),
            None,
        )
        .await
        .unwrap();
    let sets = parse_daemonsets(&out.stdout, &marker).unwrap();
    assert_eq!(sets.len(), 2);
    let mut kured = KuredInfo::from_daemonset(&sets[1]).unwrap();
    assert_eq!(kured.argv, ["/usr/bin/kured"], "the listing has no args");
    kured.read_settings(&api).await.unwrap();
    assert_eq!(kured.argv[1], "--ds-name=kured");
    assert_eq!(kured.env.get("KURED_NODE_ID"), Some(&None));
}

#[tokio::test]
async fn only_kureds_own_container_is_read_beyond_names_and_images() {
    let api = helm_kured();
    api.add_ds(
        "monitoring",
        "shipper",
        vec![Container {
            args: strings(&["--token=s3cr3t"]),
            ..Container::other("shipper", "grafana/alloy:v1")
        }],
    );
    acquire(&api, &LockOptions::default(), &me(), at(NOW))
        .await
        .unwrap();
    let reads: Vec<Vec<String>> = api
        .calls_of("get daemonsets")
        .into_iter()
        .chain(api.calls_of("get daemonset"))
        .map(|(args, _)| args)
        .collect();
    let templates: Vec<&str> = reads
        .iter()
        .filter_map(|a| a.last().map(String::as_str))
        .collect();
    assert_eq!(templates.len(), 3, "{reads:?}");
    assert!(templates[0].contains("{.command[0]}") && !templates[0].contains(".args"));
    assert!(templates[1].contains(".spec.template.spec.containers[0].args"));
    assert_eq!(
        &reads[1][..6],
        ["-n", "kured", "get", "daemonset", "kured", "-o"]
    );
    assert!(templates[2].starts_with("jsonpath={.metadata.resourceVersion}"));
}

// ---------------------------------------------------------------------------
// What counts as Kured (issue 24, item 3)

#[tokio::test]
async fn a_decoy_kured_pod_or_daemonset_that_cannot_reboot_a_node_blocks_nothing() {
    // A user who may create pods in `dev` only: a bare pod and a DaemonSet
    // running a `kured` image, neither with hostPID nor privileged (what
    // Pod Security's baseline level forbids them anyway).
    let api = Api::default();
    api.state().pods.push((
        "dev".into(),
        "decoy".into(),
        vec![Container::other("app", "evil.example/kured:1")],
    ));
    api.add_ds(
        "dev",
        "fake-kured",
        vec![Container::other("kured", "evil.example/kured:1")],
    );
    let lock = acquire(&api, &LockOptions::default(), &me(), at(NOW))
        .await
        .unwrap();
    assert!(
        lock.describe()
            .starts_with("fleetctl's lock (configmap kube-system/fleetctl-lock)"),
        "{}",
        lock.describe()
    );
    assert!(
        api.state()
            .annotation("dev", "fake-kured", KURED_ANNOTATION)
            .is_none(),
        "the fake DaemonSet's annotation is not the lock"
    );
    // The operator is told what was passed over, and how to name a real one.
    assert_eq!(
        lock.warnings(),
        [
            "daemonset dev/fake-kured runs image \"evil.example/kured:1\" but its pods cannot reboot \
             a node (Kured needs hostPID and a privileged container): not taken for Kured. If it is \
             your Kured, name it with `kured: dev/fake-kured` in the inventory",
            "pod dev/fake-kured-x7k2p (owned by a DaemonSet), dev/decoy runs Kured's program or \
             image but cannot reboot a node (Kured needs hostPID and a privileged container): not \
             taken for Kured",
        ]
    );

    // Beside the real Kured, the fake DaemonSet is not a second Kured.
    let api = helm_kured();
    api.add_ds(
        "dev",
        "fake-kured",
        vec![Container::other("kured", "evil.example/kured:1")],
    );
    let lock = acquire(&api, &LockOptions::default(), &me(), at(NOW))
        .await
        .unwrap();
    assert!(
        lock.describe()
            .ends_with("Kured runs as daemonset kured/kured"),
        "{}",
        lock.describe()
    );
    assert_eq!(lock.warnings().len(), 1, "{:?}", lock.warnings());

    // Named in the inventory, a DaemonSet is Kured whatever its pods may do.
    let api = Api::default();
    api.add_ds(
        "dev",
        "fake-kured",
        vec![Container::other("kured", "evil.example/kured:1")],
    );
    let named = LockOptions {
        kured: Some(KuredRef {
            namespace: "dev".into(),
            name: "fake-kured".into(),
        }),
        ..LockOptions::default()
    };
    // (Taken for Kured: its default flags put the lock on kube-system/kured.)
    let err = acquire(&api, &named, &me(), at(NOW)).await.unwrap_err();
    assert!(
        err.to_string()
            .starts_with("cp-1: Kured (daemonset dev/fake-kured) keeps its reboot lock on daemonset kube-system/kured"),
        "{err}"
    );
}

#[test]
fn concurrency_is_bounded_before_it_sizes_the_lock() {
    let at_bound = info(&["/usr/bin/kured", "--concurrency=256"], &[], IMAGE);
    assert_eq!(at_bound.config().unwrap().concurrency, MAX_CONCURRENCY);
    for huge in ["257", "4294967296", "9223372036854775807"] {
        let k = info(
            &["/usr/bin/kured", &format!("--concurrency={huge}")],
            &[],
            IMAGE,
        );
        let err = k.config().unwrap_err().to_string();
        assert!(
            err.starts_with(&format!(
                "Kured's daemonset kured/kured sets --concurrency to {huge}: fleetctl holds Kured off \
                 by taking every slot of its lock, and more than 256 entries"
            )),
            "{err}"
        );
    }
}
