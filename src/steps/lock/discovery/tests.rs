//! Finding Kured against Kured's real manifests and flag rules, with the
//! fake API server.

use super::kured_settings::*;
use super::*;
use crate::steps::lock::listing::ContainerInfo;
use crate::steps::lock::lock_testkit::*;

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
            "Kured docker.io/weaveworks/kured:1.4.5 predates lock TTLs (1.5.0): if this run dies \
          holding its lock, Kured stays blocked until a fleetctl run with `--force-unlock`"
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

/// What the fake API server lists is what the listing parser reads, and
/// Kured's own container is read again for its args and env.
#[tokio::test]
async fn the_fake_api_prints_listings_the_parser_reads() {
    let api = helm_kured();
    let marker = Marker::new().unwrap();
    let query = crate::remote::kubectl::list_daemonsets(marker.as_str());
    let out = api
        .kubectl("", &query.args, Some(&query.template))
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
