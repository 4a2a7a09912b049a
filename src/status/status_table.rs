//! The table `fleetctl status` prints: one row a node (running → staged,
//! pin, rollback image, Flatcar, reboot), why the silent nodes did not
//! answer, the summary line, then the warnings and the etcd, Ceph and Kured
//! sections.

use super::{NodeStatus, PinSummary, StatusReport, etcd_table, kured_blockers, storage};
use crate::inventory::Role;
use crate::node::{Extension, OsFacts};
use crate::ui::{self, Table};
use crate::version::{Minor, Version};

fn arrow(running: Option<String>, staged: Option<String>) -> (String, bool) {
    match (running, staged) {
        (Some(r), Some(s)) if r != s => (format!("{r} → {s}"), true),
        (Some(r), _) => (r, false),
        (None, Some(s)) => (format!("? → {s}"), true),
        (None, None) => ("-".to_string(), false),
    }
}

fn kubernetes_cell(k: &Extension) -> String {
    let (text, pending) = arrow(
        k.running.as_ref().map(Version::to_string),
        k.staged.as_ref().map(Version::to_string),
    );
    let text = if pending {
        format!("{} {}", text, ui::attention("(reboot pending)"))
    } else {
        text
    };
    if crate::node::running_image_gone(k).is_some() {
        format!("{text} {}", ui::bad("(running image gone)"))
    } else {
        text
    }
}

fn os_cell(os: &OsFacts) -> String {
    let (text, pending) = arrow(Some(os.running.clone()), os.staged.clone());
    // The node's own words: escaped before they meet our colours.
    if pending {
        ui::attention(&text)
    } else {
        ui::escape::escape_controls(&text).into_owned()
    }
}

fn pin_cell(p: &PinSummary) -> String {
    match p {
        PinSummary::Pinned { minor } => minor.to_string(),
        PinSummary::Floating => ui::bad("FLOATING"),
        PinSummary::Mixed { minors } => ui::attention(
            &minors
                .iter()
                .map(Minor::to_string)
                .collect::<Vec<_>>()
                .join("+"),
        ),
        PinSummary::None => ui::attention("none"),
        PinSummary::Unknown => ui::attention("unknown"),
        PinSummary::Unreachable => "-".to_string(),
    }
}

fn state_cell(s: &NodeStatus) -> String {
    if !s.reachable {
        return ui::bad("unreachable");
    }
    let mut text = match s.ready {
        Some(true) => ui::good("Ready"),
        Some(false) => ui::bad("NotReady"),
        None => ui::dim("?"),
    };
    if s.cordoned == Some(true) {
        text.push_str(&ui::attention(",cordoned"));
    }
    text
}

/// Why `node` did not answer, naming it once: transport errors already start
/// with the node's name (`w-2: cannot connect …`, `w-1 (10.0.0.21:22): …`).
pub(super) fn reason_line(node: &str, error: &str) -> String {
    // An error may quote what a node printed: escaped first, so that on
    // stdout it cannot pass for fleetctl's own colours.
    let error = &ui::escape::escape_controls(error);
    let rest = match error.strip_prefix(node) {
        Some(rest) if rest.starts_with(':') || rest.starts_with(' ') => rest.to_string(),
        _ => format!(": {error}"),
    };
    format!("{}{rest}\n", ui::bad(node))
}

pub fn render_table(r: &StatusReport) -> String {
    let mut t = Table::new(&[
        "NODE",
        "ROLE",
        "STATE",
        "KUBERNETES (running → staged)",
        "PIN",
        "ROLLBACK TO",
        "FLATCAR",
        "REBOOT",
    ]);
    for s in &r.nodes {
        let role = match s.role {
            Role::ControlPlane => "control-plane",
            Role::Worker => "worker",
        };
        let (k, os, reboot) = match &s.facts {
            Some(f) => (
                kubernetes_cell(&f.kubernetes),
                os_cell(&f.os),
                if f.reboot_required {
                    ui::attention("required")
                } else if s.reboot_pending {
                    // Staged, but nothing asks Kured to reboot it.
                    ui::attention("pending")
                } else {
                    "-".to_string()
                },
            ),
            None => ("-".into(), "-".into(), "-".into()),
        };
        t.row(vec![
            s.name.clone(),
            role.into(),
            state_cell(s),
            k,
            pin_cell(&s.pin),
            s.rollback_to
                .as_ref()
                .map_or_else(|| "-".to_string(), Version::to_string),
            os,
            reboot,
        ]);
    }
    let mut out = t.render();
    for s in r.nodes.iter().filter(|s| !s.reachable) {
        out.push_str(&reason_line(
            &s.name,
            s.error.as_deref().unwrap_or("no answer"),
        ));
    }
    out.push('\n');
    let version = r
        .cluster
        .version
        .as_ref()
        .map_or_else(|| "unknown".to_string(), Version::to_string);
    out.push_str(&format!(
        "cluster {} · {} nodes ({} answered) · {} need a reboot · {} floating\n",
        ui::bold(&version),
        r.summary.nodes,
        r.summary.answered,
        r.summary.reboot_pending,
        r.summary.floating
    ));
    if let Some(etcd) = &r.etcd {
        out.push_str(&etcd_table::render(etcd));
    }
    for w in &r.summary.warnings {
        let w = ui::escape::escape_controls(w);
        out.push_str(&format!("{} {w}\n", ui::attention("warning:")));
    }
    if let Some(ceph) = &r.ceph {
        out.push_str(&storage::render(ceph));
    }
    if let Some(kured) = &r.kured {
        out.push_str(&kured_blockers::render(kured));
    }
    out
}
