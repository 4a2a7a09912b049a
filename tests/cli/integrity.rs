//! Image integrity (issue 15, item 6): apply never runs, stages or
//! downloads a kubernetes image it cannot check against one sha256 itself.
//! Here, on the real curl: an https:// hub's redirect to http:// is not
//! followed, and the refusal is exit 2 before any node changes, checked on
//! the fleet's own event log. The other refusals (a stale or ambiguous sum,
//! an unreadable hub without a saved sum, a saved sum that is not one, a
//! plain-HTTP hub) are proven on pure code (docs/rules-on-the-fake.md).

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
