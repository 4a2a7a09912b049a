//! Finding Kured's daemonset through `acquire`, against the fake API server:
//! by its Helm release, by name, refused when ambiguous or unusable, and what
//! counts as Kured (issue 24, item 3).

use super::*;

const TTL: std::time::Duration = std::time::Duration::from_secs(15 * 60);

// ---------------------------------------------------------------------------
// Finding Kured

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
    let calls: Vec<_> = api
        .calls_of("get daemonsets")
        .into_iter()
        .chain(api.calls_of("get daemonset"))
        .collect();
    let reads: Vec<Vec<String>> = calls.iter().map(|(args, _)| args.clone()).collect();
    // The listing's template comes on stdin (its marker kept off argv).
    let templates: Vec<String> = calls
        .iter()
        .filter_map(|(a, stdin)| match a.last().map(String::as_str) {
            Some("jsonpath-file=/dev/stdin") => stdin.clone(),
            other => other.map(String::from),
        })
        .collect();
    assert_eq!(templates.len(), 3, "{reads:?}");
    assert!(
        templates[0].contains("{.command[0]}") && !templates[0].contains(".args"),
        "{templates:?}"
    );
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
