use super::*;

mod cluster_output;
mod parse_properties;
mod probe_facts;

fn fixture(name: &str) -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/node/fixtures/");
    std::fs::read_to_string(format!("{path}{name}")).expect("fixture exists")
}

/// One section, as the script prints it.
fn section(name: &str, stdout: &str, stderr: &str, status: i32) -> String {
    let stderr = if stderr.is_empty() {
        String::new()
    } else {
        format!("{stderr}\n")
    };
    format!(
        "@@fleetctl:begin {name}@@\n{stdout}\n@@fleetctl:stderr@@\n{stderr}@@fleetctl:end {status}@@\n"
    )
}

/// The facts fixture with one section's body replaced.
fn facts_with(name: &str, replacement: &str) -> String {
    let full = fixture("facts.cp-1.txt");
    let start = full
        .find(&format!("@@fleetctl:begin {name}@@"))
        .expect("section in fixture");
    let end = start + full[start..].find("@@fleetctl:end ").unwrap();
    let end = end + full[end..].find('\n').unwrap() + 1;
    format!("{}{replacement}{}", &full[..start], &full[end..])
}

fn v(s: &str) -> Version {
    s.parse().unwrap()
}

fn pinned_conf() -> SysupdateConfig {
    SysupdateConfig {
        path: "/etc/sysupdate.kubernetes.d/kubernetes.conf".into(),
        sha256: "c9add19e68960b29583f67f13069088be551272c4868f73d0f87aae26cf68346".into(),
        pin: Pin::Pinned(Minor::new(1, 37)),
        content: fixture("kubernetes-v1.37.conf"),
    }
}

fn expected_cp1() -> NodeFacts {
    NodeFacts {
        hostname: "cp-1".into(),
        boot_id: "8181f9d7-4fb1-4e32-9102-b1821a4359f0".into(),
        uptime_seconds: 351_208,
        os: OsFacts {
            running: "3510.3.5".into(),
            staged: Some("3510.3.6".into()),
            current_op: "UPDATE_STATUS_UPDATED_NEED_REBOOT".into(),
        },
        kubernetes: Extension {
            running: Some(v("v1.36.4")),
            staged: Some(v("v1.37.2")),
            staged_target: Some(
                "../../opt/extensions/kubernetes/kubernetes-v1.37.2-x86-64.raw".into(),
            ),
            images: vec![v("v1.36.4"), v("v1.37.2")],
            configs: vec![pinned_conf()],
        },
        containerd: Some(Extension {
            running: Some(v("v2.1.4")),
            staged: Some(v("v2.1.4")),
            staged_target: Some("/opt/extensions/containerd/containerd-2.1.4-x86-64.raw".into()),
            images: vec![v("v2.1.4")],
            configs: vec![SysupdateConfig {
                path: "/etc/sysupdate.containerd.d/containerd.conf".into(),
                sha256: "4e718550867485a2d4d3924de825c4ffd0be36c8b01c9108097d5181e1111109".into(),
                pin: Pin::Floating,
                content: fixture("kubernetes.conf").replace("kubernetes", "containerd"),
            }],
        }),
        reboot_required: true,
        kubeadm_step: Some(v("v1.37.2")),
        arch: Some("x86_64".into()),
        kubelet_files: [
            (
                "/var/lib/kubelet/kubeadm-flags.env".to_string(),
                "KUBELET_KUBEADM_ARGS=\"--container-runtime-endpoint=unix:///var/run/containerd/containerd.sock \
                 --node-ip=10.0.0.11 --pod-infra-container-image=registry.k8s.io/pause:3.10\"\n"
                    .to_string(),
            ),
            (
                "/etc/systemd/system/kubelet.service.d/20-node-ip.conf".to_string(),
                "[Service]\nEnvironment=\"KUBELET_EXTRA_ARGS=--node-ip=10.0.0.11\"\n".to_string(),
            ),
        ]
        .into(),
        cgroup: crate::node::CgroupFacts {
            v2: Some(true),
            kubelet_config: Some(
                "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncgroupDriver: systemd\n"
                    .into(),
            ),
            instance_config: None,
        },
        stage_records: [(
            "kubernetes".to_string(),
            crate::node::StageRecord {
                boot_id: "8181f9d7-4fb1-4e32-9102-b1821a4359f0".into(),
                previous: Some(v("v1.36.4")),
            },
        )]
        .into(),
    }
}

#[test]
fn whole_facts_output_of_a_flatcar_node() {
    assert_eq!(
        parse_facts(&fixture("facts.cp-1.txt")).unwrap(),
        expected_cp1()
    );
}

#[test]
fn crlf_output_gives_the_same_facts() {
    let crlf = fixture("facts.cp-1.txt").replace('\n', "\r\n");
    let facts = parse_facts(&crlf).unwrap();
    let mut expected = expected_cp1();
    // The transport turned every newline into CRLF, config content included;
    // the fingerprint follows what was received.
    for config in expected
        .kubernetes
        .configs
        .iter_mut()
        .chain(expected.containerd.as_mut().unwrap().configs.iter_mut())
    {
        config.content = config.content.replace('\n', "\r\n");
        config.sha256 = sha256_hex(config.content.as_bytes());
    }
    for content in expected.kubelet_files.values_mut() {
        *content = content.replace('\n', "\r\n");
    }
    if let Some(config) = expected.cgroup.kubelet_config.as_mut() {
        *config = config.replace('\n', "\r\n");
    }
    assert_eq!(facts, expected);
}

#[test]
fn noise_around_the_sections_is_ignored() {
    let noisy = format!(
        "Flatcar Container Linux by Kinvolk stable 3510.3.5\n\
         Update Strategy: No Reboots\n{}trailing junk without newline",
        fixture("facts.cp-1.txt")
    );
    assert_eq!(parse_facts(&noisy).unwrap(), expected_cp1());
}

#[test]
fn missing_sections_mean_absent_facts() {
    let without_kubelet = facts_with("kubernetes-running", "");
    let facts = parse_facts(&without_kubelet).unwrap();
    assert_eq!(facts.kubernetes.running, None);
    assert_eq!(facts.kubernetes.staged, Some(v("v1.37.2")));

    let only_hostname = section("hostname", "w-9", "", 0);
    let facts = parse_facts(&only_hostname).unwrap();
    assert_eq!(facts.hostname, "w-9");
    assert_eq!(facts.boot_id, "");
    assert_eq!(facts.uptime_seconds, 0);
    assert_eq!(
        facts.os,
        OsFacts {
            running: String::new(),
            staged: None,
            current_op: String::new()
        }
    );
    assert_eq!(
        facts.kubernetes,
        Extension {
            running: None,
            staged: None,
            staged_target: None,
            images: vec![],
            configs: vec![],
        }
    );
    assert_eq!(facts.containerd, None);
    assert!(!facts.reboot_required);
}

#[test]
fn a_missing_tool_is_absence_not_an_error() {
    let output = facts_with(
        "kubernetes-running",
        &section("kubernetes-running", "", "sh: 1: kubelet: not found", 127),
    );
    let facts = parse_facts(&output).unwrap();
    assert_eq!(facts.kubernetes.running, None);
}

#[test]
fn a_tool_that_prints_no_version_is_an_error() {
    let output = facts_with(
        "kubernetes-running",
        &section("kubernetes-running", "Segmentation fault", "", 0),
    );
    let err = parse_facts(&output).unwrap_err();
    assert_eq!(
        format!("{err:#}"),
        "cannot read the node's Kubernetes facts: `kubelet --version` succeeded but printed \
         `Segmentation fault`, which holds no version like v1.2.3; check the kubelet binary \
         on this node"
    );
}

#[test]
fn output_without_sections_is_an_error_that_quotes_it() {
    let err = parse_facts("sudo: a password is required\n").unwrap_err();
    assert_eq!(
        format!("{err:#}"),
        "the facts script printed no sections, so it did not run as expected; its output \
         began with: `sudo: a password is required`"
    );
    let err = parse_facts("").unwrap_err();
    assert!(format!("{err:#}").ends_with("its output began with: (nothing)"));
}

#[test]
fn truncated_output_keeps_what_arrived() {
    let full = fixture("facts.cp-1.txt");
    let cut = &full[..full.find("kubernetes-v1.36.4-x86-64.raw").unwrap()];
    let facts = parse_facts(cut).unwrap();
    assert_eq!(facts.kubernetes.running, Some(v("v1.36.4")));
    assert_eq!(facts.kubernetes.staged, Some(v("v1.37.2")));
    // The images section never ended: not trusted.
    assert!(facts.kubernetes.images.is_empty());
    assert!(facts.kubernetes.configs.is_empty());
}

#[test]
fn a_symlink_to_an_unversioned_image_keeps_its_target() {
    let output = facts_with(
        "kubernetes-staged",
        &section(
            "kubernetes-staged",
            "/opt/extensions/kubernetes/custom.raw",
            "",
            0,
        ),
    );
    let facts = parse_facts(&output).unwrap();
    assert_eq!(facts.kubernetes.staged, None);
    assert_eq!(
        facts.kubernetes.staged_target.as_deref(),
        Some("/opt/extensions/kubernetes/custom.raw")
    );
}

#[test]
fn no_reboot_marker_and_an_absent_symlink() {
    let output = facts_with("reboot-required", &section("reboot-required", "", "", 1));
    let output = output.replace(
        "@@fleetctl:begin kubernetes-staged@@\n../../opt/extensions/kubernetes/kubernetes-v1.37.2-x86-64.raw\n\n@@fleetctl:stderr@@\n@@fleetctl:end 0@@",
        "@@fleetctl:begin kubernetes-staged@@\n\n@@fleetctl:stderr@@\n@@fleetctl:end 1@@",
    );
    let facts = parse_facts(&output).unwrap();
    assert!(!facts.reboot_required);
    assert_eq!(facts.kubernetes.staged_target, None);
    assert_eq!(facts.kubernetes.staged, None);
}

#[test]
fn update_engine_states_from_real_output() {
    let os = |stdout: &str| {
        let output = section("update-engine", stdout.trim_end(), "", 0)
            + &section(
                "os-release",
                fixture("os-release.flatcar").trim_end(),
                "",
                0,
            );
        parse_facts(&output).unwrap().os
    };
    assert_eq!(
        os(&fixture("update-engine-status.idle")),
        OsFacts {
            running: "3510.3.5".into(),
            staged: None,
            current_op: "UPDATE_STATUS_IDLE".into()
        }
    );
    let downloading = os(&fixture("update-engine-status.downloading"));
    assert_eq!(downloading.current_op, "UPDATE_STATUS_DOWNLOADING");
    assert_eq!(downloading.staged, None, "not staged until written");
    let unversioned = os(&fixture("update-engine-status.need-reboot-unversioned"));
    assert_eq!(unversioned.staged.as_deref(), Some("unknown"));
}

#[test]
fn os_release_values_are_unquoted() {
    let kv = key_values(&fixture("os-release.flatcar"));
    assert_eq!(kv["VERSION"], "3510.3.5");
    assert_eq!(
        kv["PRETTY_NAME"],
        "Flatcar Container Linux by Kinvolk 3510.3.5 (LTS 2023)"
    );
    assert_eq!(kv["ID"], "flatcar");
    let debian = key_values("VERSION_ID=\"12\"\nVERSION='12 (bookworm)'\nnot a pair\nlower=x\n");
    assert_eq!(
        debian.get("VERSION").map(String::as_str),
        Some("12 (bookworm)")
    );
    assert_eq!(debian.get("lower"), None);
}

#[test]
fn versions_from_real_version_output() {
    assert_eq!(
        first_version(&fixture("kubelet-version")),
        Some(v("v1.34.5"))
    );
    assert_eq!(
        first_version(&fixture("containerd-version")),
        Some(v("1.5.8"))
    );
    assert_eq!(
        first_version("containerd github.com/containerd/containerd/v2 v2.1.4 75cb2b7\n"),
        Some(v("v2.1.4"))
    );
    assert_eq!(
        first_version("Kubernetes v1.35.0-rc.1"),
        Some(v("v1.35.0-rc.1"))
    );
    assert_eq!(first_version("Kubernetes"), None);
}

#[test]
fn uptime_is_whole_seconds() {
    assert_eq!(uptime_seconds("351208.43 694112.87\n"), Some(351_208));
    assert_eq!(uptime_seconds("12 1"), Some(12));
    assert_eq!(uptime_seconds(""), None);
    assert_eq!(uptime_seconds("-1.0 2"), None);
}

#[test]
fn image_names_carry_their_version() {
    let k = "kubernetes";
    assert_eq!(
        image_version(k, "kubernetes-v1.35.2-x86-64.raw"),
        Some(v("v1.35.2"))
    );
    assert_eq!(
        image_version(k, "kubernetes-v1.35.2-arm64.raw"),
        Some(v("v1.35.2"))
    );
    assert_eq!(
        image_version(k, "kubernetes-v1.36.0-rc.1-x86-64.raw"),
        Some(v("v1.36.0-rc.1"))
    );
    // The sysext-kured demo named images without v and architecture.
    assert_eq!(image_version(k, "kubernetes-1.26.6.raw"), Some(v("1.26.6")));
    for not_an_image in [
        "kubernetes.raw",
        "kubernetes-v1.35-x86-64.raw",
        "kubernetes-v1.35.2-x86-64.raw.part",
        "containerd-2.1.4-x86-64.raw",
        "kubernetesv1.35.2.raw",
        "",
    ] {
        assert_eq!(image_version(k, not_an_image), None, "{not_an_image}");
    }
}

#[test]
fn symlink_targets_name_their_image() {
    assert_eq!(
        file_name("../../opt/extensions/kubernetes/kubernetes-v1.35.2-x86-64.raw"),
        "kubernetes-v1.35.2-x86-64.raw"
    );
    assert_eq!(
        file_name("kubernetes-v1.35.2-x86-64.raw"),
        "kubernetes-v1.35.2-x86-64.raw"
    );
    assert_eq!(file_name("/a/"), "");
}

#[test]
fn pins_of_sysext_bakery_configs() {
    assert_eq!(
        detect_pin("kubernetes", &fixture("kubernetes-v1.37.conf")),
        Pin::Pinned(Minor::new(1, 37))
    );
    assert_eq!(
        detect_pin("kubernetes", &fixture("kubernetes.conf")),
        Pin::Floating
    );
    assert_eq!(
        detect_pin("kubernetes", &fixture("kubernetes-v1.33.transfer")),
        Pin::Pinned(Minor::new(1, 33))
    );
    // Another component's pattern tells nothing about this one.
    assert_eq!(
        detect_pin("containerd", &fixture("kubernetes.conf")),
        Pin::Unknown
    );
}

#[test]
fn pin_rules_for_unusual_configs() {
    let source =
        |lines: &str| format!("[Transfer]\nVerify=false\n\n[Source]\nType=url-file\n{lines}\n");
    let pin = |lines: &str| detect_pin("kubernetes", &source(lines));
    let v137 = Pin::Pinned(Minor::new(1, 37));

    assert_eq!(pin(""), Pin::Unknown, "no MatchPattern");
    assert_eq!(pin("MatchPattern=foo-@v.raw"), Pin::Unknown, "unrecognised");
    assert_eq!(
        pin("MatchPattern = kubernetes-v1.37.@v-%a.raw"),
        v137,
        "spaces around ="
    );
    assert_eq!(pin("MatchPattern=kubernetes-1.37.@v-%a.raw"), v137, "no v");
    assert_eq!(
        pin("MatchPattern=kubernetes-v1.37.@v-%a.raw\nMatchPattern=kubernetes-@v-%a.raw"),
        Pin::Floating,
        "floating if any floats"
    );
    assert_eq!(
        pin("MatchPattern=kubernetes-v1.37.@v-%a.raw kubernetes-v1.37.@v-%a.raw.xz"),
        v137,
        "several on one line, all pinned alike"
    );
    assert_eq!(
        pin("MatchPattern=kubernetes-v1.37.@v-%a.raw\nMatchPattern=kubernetes-v1.38.@v-%a.raw"),
        Pin::Unknown,
        "pinned to two minors"
    );
    assert_eq!(
        pin("MatchPattern=kubernetes-v1.37.@v-%a.raw\nMatchPattern=other"),
        Pin::Unknown,
        "pinned plus something unrecognised"
    );
    assert_eq!(
        pin(
            "MatchPattern=kubernetes-@v-%a.raw\nMatchPattern=\nMatchPattern=kubernetes-v1.37.@v-%a.raw"
        ),
        v137,
        "an empty assignment resets the list"
    );
    assert_eq!(
        pin(
            "#MatchPattern=kubernetes-@v-%a.raw\n;MatchPattern=kubernetes-@v-%a.raw\nMatchPattern=kubernetes-v1.37.@v-%a.raw"
        ),
        v137,
        "comments"
    );
    assert_eq!(
        detect_pin(
            "kubernetes",
            "[Source]\nMatchPattern=kubernetes-v1.37.@v-%a.raw\n[Target]\nMatchPattern=kubernetes-@v-%a.raw\n"
        ),
        v137,
        "only [Source] decides what is downloaded"
    );
    assert_eq!(
        detect_pin("kubernetes", "MatchPattern=kubernetes-@v-%a.raw\n"),
        Pin::Unknown,
        "outside any section"
    );
    assert_eq!(pin("MatchPattern=kubernetes-vx.37.@v-%a.raw"), Pin::Unknown);
}

#[test]
fn sha256_matches_sha256sum() {
    // Values from coreutils' sha256sum on the same bytes.
    assert_eq!(
        sha256_hex(fixture("kubernetes-v1.37.conf").as_bytes()),
        "c9add19e68960b29583f67f13069088be551272c4868f73d0f87aae26cf68346"
    );
    assert_eq!(
        sha256_hex(b""),
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    );
}

#[test]
fn sections_keep_stdout_exact_and_stderr_apart() {
    let output = "@@fleetctl:begin a x y@@\nno newline\n@@fleetctl:stderr@@\nwarn\n@@fleetctl:end 3@@\n\
                  @@fleetctl:begin b@@\n\n\n@@fleetctl:end 0@@\n\
                  @@fleetctl:begin c@@\nlast";
    let sections = Sections::parse(output);
    let got: Vec<_> = sections
        .list
        .iter()
        .map(|s| {
            (
                s.name,
                s.arg,
                s.stdout.as_str(),
                s.stderr.as_str(),
                s.status,
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("a", Some("x y"), "no newline", "warn\n", Some(3)),
            ("b", None, "\n", "", Some(0)),
            ("c", None, "last", "", None),
        ]
    );
}
