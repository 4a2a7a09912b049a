//! The plan as an operator reads it before anything is touched: where the
//! cluster goes and at what cost in reboots, every hop's steps in order
//! (with the ones that run in parallel grouped), what is wrong with the
//! fleet, and how each node's sysupdate config will change.
//!
//! Returns strings; the caller decides where they go and whether colour is
//! wanted (`color` forces it on or off, so output never depends on the
//! terminal this happens to run in).

use std::collections::BTreeSet;
use std::fmt::Write as _;

use console::Style;

use super::diff::hunks;
use super::model::{Action, Component, Hop, HopKind, Plan};
use super::workers::WorkerStrategy;
use crate::checks::{Check, Verdict};

/// Lines of context around each changed config line.
const DIFF_CONTEXT: usize = 2;

struct Paint {
    color: bool,
    /// Written in place of ESC in our own styles while the text is built,
    /// and turned back into ESC only after every other ESC (one a node or
    /// the hub put in a warning, a check's detail, a config line) was
    /// escaped: remote text cannot carry fleetctl's colours, however it is
    /// placed (issue 38). Random per render, so no remote text can hold it.
    mark: String,
}

impl Paint {
    fn new(color: bool) -> Paint {
        use std::hash::{BuildHasher, Hasher};
        let random = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish();
        Paint {
            color,
            mark: format!("\u{e000}{random:016x}\u{e001}"),
        }
    }

    /// Escapes, then colours.
    fn with(&self, style: Style, text: &str) -> String {
        style
            .apply_to(crate::ui::escape::escape_controls(text))
            .force_styling(self.color)
            .to_string()
            .replace('\u{1b}', &self.mark)
    }
    fn bold(&self, t: &str) -> String {
        self.with(Style::new().bold(), t)
    }
    fn dim(&self, t: &str) -> String {
        self.with(Style::new().dim(), t)
    }
    fn warn(&self, t: &str) -> String {
        self.with(Style::new().yellow(), t)
    }
    fn removed(&self, t: &str) -> String {
        self.with(Style::new().red(), t)
    }
    fn added(&self, t: &str) -> String {
        self.with(Style::new().green(), t)
    }

    /// The built text: every control character escaped, then our own
    /// styles' ESC put back.
    fn finish(&self, text: &str) -> String {
        crate::ui::escape::escape_controls(text).replace(&self.mark, "\u{1b}")
    }
}

/// The whole plan as text, ending with a newline.
pub fn render(plan: &Plan, color: bool) -> String {
    let p = Paint::new(color);
    let mut out = String::new();
    header(&mut out, plan, &p);
    let total = plan.hops.len();
    let mut number = 1;
    for (i, hop) in plan.hops.iter().enumerate() {
        out.push('\n');
        hop_text(&mut out, hop, i + 1, total, &mut number, &p);
    }
    if !plan.warnings.is_empty() {
        let _ = writeln!(out, "\n{}", p.bold("Warnings"));
        for w in &plan.warnings {
            let _ = writeln!(out, "  {} {w}", p.warn("!"));
        }
    }
    config_changes(&mut out, plan, &p);
    p.finish(&out)
}

/// One line: what the plan amounts to, or that there is nothing to do.
pub fn summary(plan: &Plan) -> String {
    let from = plan
        .cluster_from
        .as_ref()
        .map(|v| v.to_string())
        .unwrap_or_else(|| "an unknown version".to_string());
    if plan.is_noop() {
        return format!(
            "Nothing to do: the cluster is at {from} and every node runs, stages and pins {}.",
            plan.target
        );
    }
    let hops = plan.hops.len();
    format!(
        "{hops} {} from {from} to {}, {} reboot{}.",
        if hops == 1 { "hop" } else { "hops" },
        target_text(plan),
        plan.total_reboots(),
        if plan.total_reboots() == 1 { "" } else { "s" }
    )
}

fn target_text(plan: &Plan) -> String {
    match plan.final_version() {
        Some(v) => v.to_string(),
        None => plan.target.to_string(),
    }
}

fn header(out: &mut String, plan: &Plan, p: &Paint) {
    let from = plan
        .cluster_from
        .as_ref()
        .map(|v| v.to_string())
        .unwrap_or_else(|| "?".to_string());
    let asked = match &plan.requested {
        crate::version::TargetVersion::Exact(v) if plan.final_version() != Some(v) => {
            format!(" (asked for {v})")
        }
        _ => String::new(),
    };
    let title = format!("Plan: cluster {from} → {}{asked}", target_text(plan));
    let _ = writeln!(out, "{}", p.bold(&title));
    let _ = writeln!(out, "  {}", summary(plan));
    if !plan.is_noop() {
        let per_node: Vec<String> = plan
            .reboots()
            .iter()
            .map(|(n, c)| format!("{n} {c}"))
            .collect();
        let _ = writeln!(out, "  reboots per node: {}", per_node.join(", "));
    }
    if !plan.is_noop() {
        workers_text(out, plan);
    }
    let _ = writeln!(out, "  hub: {}", plan.hub);
    if let Some(c) = plan.containerd {
        let _ = writeln!(
            out,
            "  containerd: pinned to {c}, carried by the first reboots"
        );
    }
}

/// The worker strategy, what it costs in reboots against `every-hop`, and
/// every worker that stops on the way, with why.
fn workers_text(out: &mut String, plan: &Plan) {
    let w = &plan.workers;
    let how = match w.strategy {
        WorkerStrategy::Jump => {
            "jump: each worker keeps its kubelet while the control planes take \
                                 each minor, then reboots once onto the target"
        }
        WorkerStrategy::EveryHop => "every-hop: every node reboots once per minor",
    };
    let _ = writeln!(out, "  workers: {how}");
    if w.strategy == WorkerStrategy::Jump {
        let _ = writeln!(
            out,
            "  reboots: {}, {} saved against --workers every-hop ({})",
            w.reboots,
            w.saved(),
            w.every_hop_reboots
        );
    }
    for stop in &w.stops {
        let minors: Vec<String> = stop.minors.iter().map(|m| m.to_string()).collect();
        let _ = writeln!(
            out,
            "  {} also takes {}: {}",
            stop.node,
            minors.join(", "),
            stop.reason
        );
    }
}

fn hop_title(hop: &Hop) -> String {
    let what = match hop.kind {
        HopKind::Upgrade => format!("upgrade to {}", hop.minor),
        HopKind::Finish => format!(
            "finish {}: the cluster is there, some nodes are not",
            hop.minor
        ),
        HopKind::Converge => format!("converge on {}", hop.minor),
    };
    let patch = match &hop.version {
        Some(v) => format!("stages {v}"),
        None => "patch unresolved".to_string(),
    };
    let kubeadm = if hop.kubeadm { "" } else { ", no kubeadm" };
    format!("{what} ({patch}{kubeadm})")
}

fn hop_text(
    out: &mut String,
    hop: &Hop,
    index: usize,
    total: usize,
    number: &mut usize,
    p: &Paint,
) {
    let title = format!("Hop {index}/{total}: {}", hop_title(hop));
    let _ = writeln!(out, "{}", p.bold(&title));
    checks_text(out, &hop.checks, p);
    let width = hop.steps().map(|s| s.node.len()).max().unwrap_or(0);
    for phase in &hop.phases {
        let nodes: BTreeSet<&str> = phase.steps.iter().map(|s| s.node.as_str()).collect();
        let parallel = phase.kind.parallel() && nodes.len() > 1;
        let how = if parallel {
            " (in parallel)"
        } else if nodes.len() > 1 {
            " (one node at a time)"
        } else {
            ""
        };
        let line = format!("    {}{how}:", phase.kind.title());
        let _ = writeln!(out, "{}", p.dim(&line));
        for step in &phase.steps {
            let bar = if parallel { "│ " } else { "" };
            let _ = writeln!(
                out,
                "  {:>3}. {bar}{:<width$}  {}",
                number,
                step.node,
                step.action.describe()
            );
            *number += 1;
        }
    }
}

/// The checks before a hop: one line per check, then for anything but a
/// pass what was found and what to do.
fn checks_text(out: &mut String, checks: &[Check], p: &Paint) {
    if checks.is_empty() {
        return;
    }
    let _ = writeln!(out, "{}", p.dim("    Checks before the hop:"));
    let width = checks
        .iter()
        .map(|c| c.name.as_str().len())
        .max()
        .unwrap_or(0);
    for check in checks {
        let (mark, paint): (&str, fn(&Paint, &str) -> String) = match check.verdict {
            Verdict::Pass => ("pass", |p, t| p.dim(t).to_string()),
            Verdict::Warn => ("warn", |p, t| p.warn(t).to_string()),
            Verdict::Ignored => ("ignored", |p, t| p.warn(t).to_string()),
            Verdict::Block => ("BLOCK", |p, t| p.removed(t).to_string()),
        };
        let _ = writeln!(
            out,
            "      {} {:<width$}  {}",
            paint(p, &format!("{mark:<7}")),
            check.name.as_str(),
            check.summary
        );
        if check.verdict == Verdict::Pass {
            continue;
        }
        let indent = " ".repeat(6 + 8 + width + 2);
        for detail in &check.details {
            let _ = writeln!(out, "{indent}- {detail}");
        }
        if let Some(remedy) = &check.remedy {
            let _ = writeln!(out, "{indent}→ {remedy}");
        }
        if check.verdict == Verdict::Block {
            let _ = writeln!(
                out,
                "{indent}(or pass `--ignore-check {}` to go past it on purpose)",
                check.name
            );
        }
    }
}

/// How each node's sysupdate configs change at their first pin, against
/// what the node has now; nodes with the identical change share one diff.
/// Later hops only move the MatchPattern's minor.
fn config_changes(out: &mut String, plan: &Plan, p: &Paint) {
    let mut seen: BTreeSet<(&str, Component)> = BTreeSet::new();
    // (the pin action, nodes it applies to), in order of first appearance.
    let mut changes: Vec<(&Action, Vec<&str>)> = Vec::new();
    for step in plan.steps() {
        let Action::Pin { component, .. } = &step.action else {
            continue;
        };
        if !seen.insert((step.node.as_str(), *component)) {
            continue;
        }
        match changes
            .iter_mut()
            .find(|(a, _)| same_change(a, &step.action))
        {
            Some((_, nodes)) => nodes.push(&step.node),
            None => changes.push((&step.action, vec![&step.node])),
        }
    }
    if changes.is_empty() {
        return;
    }
    let _ = writeln!(out, "\n{}", p.bold("Config changes"));
    for (action, nodes) in changes {
        config_change(out, action, &nodes.join(", "), p);
    }
    if plan.hops.len() > 1 {
        let _ = writeln!(
            out,
            "  {}",
            p.dim("(each later hop changes only the minor in MatchPattern)")
        );
    }
}

/// Two pins change a file the same way: same file before and after, same strays.
fn same_change(a: &Action, b: &Action) -> bool {
    match (a, b) {
        (
            Action::Pin {
                path: p1,
                config: c1,
                previous: o1,
                replaces: r1,
                ..
            },
            Action::Pin {
                path: p2,
                config: c2,
                previous: o2,
                replaces: r2,
                ..
            },
        ) => p1 == p2 && c1 == c2 && o1 == o2 && r1 == r2,
        _ => false,
    }
}

fn config_change(out: &mut String, action: &Action, nodes: &str, p: &Paint) {
    let Action::Pin {
        minor,
        path,
        config,
        previous,
        replaces,
        ..
    } = action
    else {
        return;
    };
    let _ = writeln!(out, "  {nodes}: {path}");
    let old_name = if previous.is_some() {
        "now"
    } else {
        "absent now"
    };
    let _ = writeln!(out, "  --- {old_name}");
    let _ = writeln!(out, "  +++ pinned to {minor}");
    for line in hunks(previous.as_deref().unwrap_or(""), config, DIFF_CONTEXT) {
        let styled = match line.chars().next() {
            Some('-') => p.removed(&line).to_string(),
            Some('+') => p.added(&line).to_string(),
            Some('@') => p.dim(&line).to_string(),
            _ => line.clone(),
        };
        let _ = writeln!(out, "  {styled}");
    }
    for stray in replaces {
        let _ = writeln!(out, "  (disables {stray})");
    }
}
