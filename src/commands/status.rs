//! `fleetctl status`: gather, build the report, print it.

use std::process::ExitCode;

use crate::cli::{Global, StatusArgs, StatusFormat};
use crate::status;
use crate::ui::Printer;

pub async fn run(
    global: &Global,
    args: &StatusArgs,
    printer: &Printer,
) -> anyhow::Result<ExitCode> {
    let inv = super::load_inventory(global)?;
    let reach = super::Reach::new(global, &inv);
    let gathered = super::gather_fleet(&inv, &reach, printer).await?;
    let mut report = status::report(&gathered);
    // Rook-Ceph's health, read as the Ceph gate reads it; nothing when the
    // cluster has none, no control plane answered or the API could not be
    // read (the cluster line says why).
    if let Some(api) = gathered
        .nodes
        .iter()
        .filter(|n| n.node.role == crate::inventory::Role::ControlPlane)
        .find_map(|n| n.session.clone())
    {
        // Kured's blockers active now, read as apply reads them while it
        // keeps Kured's gates.
        let nodes: Vec<String> = inv.nodes.iter().map(|n| n.name.clone()).collect();
        report.kured = status::kured_blockers::kured_report(
            crate::gather::kured_reading::read(&api, &nodes).await,
        );
        report.ceph = match crate::gather::rook_reading::read(&api, &[]).await {
            Ok(Some(r)) if r.iter().any(|(_, x)| !x.is_unreadable()) => {
                Some(status::storage::ceph_reports(&r))
            }
            _ => None,
        };
    }
    // etcd as the gate before a control plane's drain reads it, through
    // the control plane that answered for the cluster.
    if let Ok((by, _)) = &gathered.cluster
        && let Some(s) = gathered
            .nodes
            .iter()
            .find(|n| &n.node.name == by)
            .and_then(|n| n.session.clone())
    {
        report.etcd = status::etcd_report(crate::gather::etcd_members(&s, by).await);
    }
    match args.output {
        StatusFormat::Json => printer.out_json(&report)?,
        StatusFormat::Table => printer.out(&status::render_table(&report)),
    }
    Ok(if gathered.all_answered() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
