//! Image integrity (issue 15, item 6): apply never runs, stages or
//! downloads a kubernetes image it cannot check against one sha256 itself.
//! A hub that stops giving one clear sum since the plan makes the plan
//! stale; a hub that cannot be read needs the saved plan's sum; a saved
//! sum that is not 64 hex characters is refused; an http:// hub needs
//! `--allow-insecure-hub`, and an https:// hub's redirect to http:// is
//! not followed. Each refusal is exit 2 before any node changes,
//! checked on the fleet's own event log.

use std::path::PathBuf;

use fleetsim::state::Event;

use super::support::{self, Fleet, Run, Scenario, assert_has, is_reboot};

const FROM: &str = "v1.34.2";

fn scenario() -> Scenario {
    support::scenario()
        .control_planes(1)
        .workers(1)
        .kubernetes(FROM)
}

fn plan_path(fleet: &Fleet) -> PathBuf {
    fleet.dir().join(".fleetctl/plan.yaml")
}

fn apply(fleet: &Fleet, args: &[&str]) -> Run {
    support::apply(fleet, args)
}

/// Nothing touched an image or a node: no download, no kubeadm, no reboot.
fn assert_untouched(fleet: &Fleet) {
    let events: Vec<Event> = fleet.events().unwrap();
    let touched: Vec<String> = events
        .iter()
        .filter(|e| {
            let program = e.argv.first().map(String::as_str).unwrap_or("");
            program.ends_with("systemd-sysupdate") || program.ends_with("kubeadm") || is_reboot(e)
        })
        .map(|e| format!("{} {}", e.node, e.argv.join(" ")))
        .collect();
    assert!(touched.is_empty(), "nodes were touched: {touched:#?}");
}

/// The SHA256SUMS line of `version`'s x86-64 image, as the hub serves it.
fn sums_line(fleet: &Fleet, version: &str) -> String {
    let sums = fleet.layout().hub().join("kubernetes/SHA256SUMS");
    let text = std::fs::read_to_string(&sums).unwrap();
    let name = format!("kubernetes-{version}-x86-64.raw");
    text.lines()
        .find(|l| l.split_whitespace().nth(1) == Some(name.as_str()))
        .unwrap_or_else(|| panic!("no {name} in\n{text}"))
        .to_string()
}

#[test]
fn a_hub_that_now_lists_two_sums_for_the_planned_image_makes_the_plan_stale() {
    let fleet = support::start(scenario());
    support::run(&fleet.inventory(), &["plan", "v1.35"]).expect_code(0);
    let saved = fleetctl::plan::load(&plan_path(&fleet)).unwrap();
    let version = saved.hops[0].version.clone().unwrap().to_string();
    let was = saved.hops[0]
        .sha256
        .clone()
        .expect("the plan recorded a sum");
    let line = sums_line(&fleet, &version);
    assert!(line.starts_with(&was), "{line} vs {was}");

    // The hub now also lists another sum for the same file.
    let sums = fleet.layout().hub().join("kubernetes/SHA256SUMS");
    let mut text = std::fs::read_to_string(&sums).unwrap();
    text.push_str(&format!(
        "{}  kubernetes-{version}-x86-64.raw\n",
        "e".repeat(64)
    ));
    std::fs::write(&sums, text).unwrap();

    let run = apply(&fleet, &["--yes"]).expect_code(2);
    assert_has(
        &run.stderr,
        &[
            "the plan is stale",
            &format!("SHA256SUMS no longer gives one sha256 for kubernetes {version}"),
            &was,
        ],
    );
    assert_untouched(&fleet);
    // Planning again cannot make it go away: no single sum, no apply.
    support::run(&fleet.inventory(), &["plan", "v1.35"]).expect_code(0);
    let run = apply(&fleet, &["--yes"]).expect_code(2);
    assert_has(
        &run.stderr,
        &[
            "fleetctl cannot verify an image this plan needs",
            &format!("kubernetes {version}: the hub's SHA256SUMS gives no single sha256 for it"),
        ],
    );
    assert_untouched(&fleet);
}

#[test]
fn an_unreadable_hub_blocks_apply_when_the_saved_plan_has_no_sum() {
    let fleet = support::start(scenario().faults(|f| f.hub_down = true));
    support::run(&fleet.inventory(), &["plan", "v1.35"]).expect_code(0);
    let saved = fleetctl::plan::load(&plan_path(&fleet)).unwrap();
    assert_eq!(saved.hops[0].sha256, None, "the hub was down at plan time");

    let run = apply(&fleet, &["--yes"]).expect_code(2);
    assert_has(
        &run.stderr,
        &[
            "fleetctl cannot verify an image this plan needs",
            "the hub's SHA256SUMS could not be read",
            "the saved plan records no sha256 for it",
            "Nothing was changed",
        ],
    );
    assert_untouched(&fleet);
}

#[test]
fn a_saved_sum_that_is_not_64_hex_characters_is_refused() {
    let fleet = support::start(scenario());
    support::run(&fleet.inventory(), &["plan", "v1.35"]).expect_code(0);
    let path = plan_path(&fleet);
    let saved = fleetctl::plan::load(&path).unwrap();
    let was = saved.hops[0].sha256.clone().unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains(&was));
    // A truncated sum: as a prefix, it would have matched before.
    std::fs::write(&path, text.replace(&was, &was[..12])).unwrap();

    let run = apply(&fleet, &["--yes"]).expect_code(2);
    assert_has(
        &run.stderr,
        &[
            "records a sha256 that is not 64 hexadecimal characters",
            &format!("hop to v1.35: `{}`", &was[..12]),
            "run `fleetctl plan` again",
        ],
    );
    assert_untouched(&fleet);
}

#[test]
fn an_http_hub_blocks_apply_unless_allowed() {
    // Refused before the lock, and a dry run takes none: it only reads, so
    // it borrows apply's 1 + 2 at v1.34.2.
    let fleet = crate::apply::SMALL_V1_34_2.get();
    support::run(&fleet.inventory(), &["plan", "v1.35"]).expect_code(0);
    for args in [&["--yes"][..], &["--dry-run"][..]] {
        let mut all = vec!["apply"];
        all.extend_from_slice(args);
        let out = support::fleetctl(&fleet.inventory(), &all)
            .env_remove("FLEETCTL_ALLOW_INSECURE_HUB")
            .output()
            .unwrap();
        let run = Run::of(out).expect_code(2);
        assert_has(
            &run.stderr,
            &[
                "is plain HTTP",
                "--allow-insecure-hub",
                "Nothing was changed",
            ],
        );
    }
    assert_untouched(&fleet);
    let dry = support::fleetctl(
        &fleet.inventory(),
        &["apply", "--dry-run", "--allow-insecure-hub"],
    )
    .env_remove("FLEETCTL_ALLOW_INSECURE_HUB")
    .output()
    .unwrap();
    Run::of(dry).expect_code(0);
}

/// Issue 38, item 7: a hub that answers over https and then redirects to
/// plain HTTP is not followed. The fleet's hub is https (its own CA, which
/// every node trusts in its system store), so `plan` reads SHA256SUMS over
/// TLS through cp-1's real curl: the control that TLS itself works. Under
/// `redirect_to_http` the same read gets `302 Found` to the plain hub:
/// curl's `--proto-redir =https` refuses it, the plan says why, and apply
/// refuses the image it cannot verify, naming the node, the hub and curl's
/// reason, before any node changes. Without `--allow-insecure-hub`.
#[test]
fn an_https_hub_that_redirects_to_http_is_refused() {
    let fleet = support::start(scenario().hub(|h| h.https = true));
    let hub = fleet.hub_url().to_string();
    assert!(hub.starts_with("https://127.0.0.1:"), "{hub}");
    let run_plain = |args: &[&str]| {
        let out = support::fleetctl(&fleet.inventory(), args)
            .env_remove("FLEETCTL_ALLOW_INSECURE_HUB")
            .output()
            .unwrap();
        Run::of(out)
    };

    // The control: over https, the plan resolves the patch and its sum.
    let run = run_plain(&["plan", "v1.35"]).expect_code(0);
    assert!(!run.stdout.contains("could not read"), "{}", run.stdout);
    let saved = fleetctl::plan::load(&plan_path(&fleet)).unwrap();
    assert!(saved.hops[0].sha256.is_some(), "read over https: {saved:?}");

    fleet.faults(|f| f.redirect_to_http = true).unwrap();
    let sums = format!("{hub}/kubernetes/SHA256SUMS");
    // curl's words: `Protocol "http" disabled (in redirect)` (8.x, the
    // real-OS root's), `… not supported or disabled in libcurl` (7.88).
    let why = "Protocol \"http\"";
    let run = run_plain(&["plan", "v1.35"]).expect_code(0);
    assert_has(
        &format!("{}{}", run.stdout, run.stderr),
        &[&format!("cp-1 could not read {sums}"), why, "disabled"],
    );
    let saved = fleetctl::plan::load(&plan_path(&fleet)).unwrap();
    assert_eq!(saved.hops[0].sha256, None, "followed the redirect");

    let run = run_plain(&["apply", "--yes"]).expect_code(2);
    assert_has(
        &run.stderr,
        &[
            "fleetctl cannot verify an image this plan needs",
            &format!("cp-1 could not read {sums}"),
            why,
            "disabled",
            "Nothing was changed",
        ],
    );
    assert_untouched(&fleet);
}
