//! The fleetsim multi-call binary. Called as `fleetsim`, it is the
//! supervisor and its helpers (`up`, `demo`, `ctl`, `events`, and the
//! internal `node-init`). Hard-linked inside a node as `kubelet`, `kubeadm`,
//! `reboot`, … it is that tool: argv[0]'s file name decides.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};

use fleetsim::layout::FleetDir;
use fleetsim::scenario::Scenario;
use fleetsim::state::Shared;
use fleetsim::{ctl, node_init, power, supervisor, tools};

const USAGE: &str = "\
fleetsim: a simulated Flatcar + kubeadm fleet (see docs/simulator.md)

usage:
  fleetsim up --scenario FILE --dir DIR   run a fleet until SIGTERM/SIGINT (as root)
  fleetsim up --nodes N [--light] --dir DIR
                                          cp-1 and N-1 workers at v1.34.2 (--light: see docs)
  fleetsim demo --dir DIR                 run the README demo's fleet (scenarios/demo.yaml)
  fleetsim ctl --dir DIR COMMAND          flip a fault or publish an image (ctl --help)
  fleetsim events --dir DIR [--json]      print the event log";

const DEMO: &str = include_str!("../scenarios/demo.yaml");

fn main() -> ExitCode {
    let mut args = std::env::args();
    let argv0 = args.next().unwrap_or_default();
    let rest: Vec<String> = args.collect();
    let name = Path::new(&argv0)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if name == "reboot" || name == "shutdown" {
        return code(power::main(&name, &rest));
    }
    if name == fleetsim::etcd_pod::container::ENTRY {
        return code(fleetsim::etcd_pod::container::main(&rest));
    }
    if name == tools::UNIT_MANAGER {
        return code(tools::unit_manager(&rest));
    }
    if name == "kured" {
        // A Kured pod, started by node-init (fleetsim::kured).
        let node = rest.first().cloned().unwrap_or_default();
        return match fleetsim::kured::pod(&node) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("kured {node}: {e:#}");
                ExitCode::FAILURE
            }
        };
    }
    if let Some(status) = fleetsim::realos::record::intercept(&argv0, &name, &rest) {
        return code(status);
    }
    if let Some(status) = tools::dispatch(&name, &rest) {
        return code(status);
    }
    match cli(&rest) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.is::<Usage>() => {
            eprintln!("fleetsim: {e}\n\n{USAGE}");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("fleetsim: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn code(status: i32) -> ExitCode {
    ExitCode::from(u8::try_from(status).unwrap_or(1))
}

/// A command-line mistake (exit 2, usage printed).
#[derive(Debug)]
struct Usage(String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

fn usage(msg: impl Into<String>) -> anyhow::Error {
    Usage(msg.into()).into()
}

/// `--flag VALUE` options before the positional words.
struct Opts {
    scenario: Option<PathBuf>,
    nodes: Option<usize>,
    light: bool,
    dir: Option<PathBuf>,
    node: Option<String>,
    json: bool,
    words: Vec<String>,
}

fn parse_opts(args: &[String]) -> Result<Opts> {
    let mut o = Opts {
        scenario: None,
        nodes: None,
        light: false,
        dir: None,
        node: None,
        json: false,
        words: Vec::new(),
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |flag: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| usage(format!("{flag} needs a value")))
        };
        match a.as_str() {
            "--scenario" => o.scenario = Some(value("--scenario")?.into()),
            "--dir" => o.dir = Some(value("--dir")?.into()),
            "--node" => o.node = Some(value("--node")?),
            "--json" => o.json = true,
            "--light" => o.light = true,
            "--nodes" => {
                let v = value("--nodes")?;
                let n = v
                    .parse()
                    .ok()
                    .filter(|n| *n >= 1)
                    .ok_or_else(|| usage(format!("--nodes needs a number ≥ 1, not {v}")))?;
                o.nodes = Some(n);
            }
            _ if o.words.is_empty() && a.starts_with("--") => {
                return Err(usage(format!("unknown option {a}")));
            }
            _ => o.words.push(a.clone()),
        }
    }
    Ok(o)
}

fn cli(args: &[String]) -> Result<()> {
    let Some((command, rest)) = args.split_first() else {
        return Err(usage("no command given"));
    };
    if matches!(command.as_str(), "-h" | "--help" | "help") {
        println!("{USAGE}");
        return Ok(());
    }
    let o = parse_opts(rest)?;
    let dir = || {
        o.dir
            .clone()
            .ok_or_else(|| usage(format!("{command} needs --dir DIR")))
    };
    match command.as_str() {
        "up" => {
            let scenario = match (&o.scenario, o.nodes) {
                (Some(path), None) => Scenario::load(path)?,
                (None, Some(n)) => Scenario::new()
                    .control_planes(1)
                    .workers(n - 1)
                    .kubernetes("v1.34.2"),
                _ => return Err(usage("up needs --scenario FILE or --nodes N")),
            };
            let scenario = if o.light {
                scenario.light(true)
            } else {
                scenario
            };
            supervisor::up(&scenario, &dir()?)
        }
        "demo" => {
            let scenario = Scenario::from_yaml(DEMO).context("the built-in demo scenario")?;
            supervisor::up(&scenario, &dir()?)
        }
        "ctl" => run_ctl(&dir()?, &o.words),
        "events" => print_events(&dir()?, o.json),
        "node-init" => {
            let node = o
                .node
                .clone()
                .ok_or_else(|| usage("node-init needs --node NAME"))?;
            node_init::run(&dir()?, &node)
        }
        "realos-init" => {
            let node = o
                .node
                .clone()
                .ok_or_else(|| usage("realos-init needs --node NAME"))?;
            fleetsim::realos::init::run(&dir()?, &node)
        }
        other => Err(usage(format!("unknown command {other}"))),
    }
}

fn run_ctl(dir: &Path, words: &[String]) -> Result<()> {
    match words.first().map(String::as_str) {
        None => return Err(usage(format!("ctl needs a command\n{}", ctl::CTL_USAGE))),
        Some("--help" | "-h") => {
            println!("{}", ctl::CTL_USAGE);
            return Ok(());
        }
        Some(_) => {}
    }
    let command = ctl::parse(words).map_err(|e| usage(format!("{e:#}")))?;
    let message = ctl::run(&FleetDir::new(dir), &command, words)?;
    println!("{message}");
    Ok(())
}

fn print_events(dir: &Path, json: bool) -> Result<()> {
    let events = Shared::new(FleetDir::new(dir).cluster()).events()?;
    let text = if json {
        let lines: Vec<String> = events
            .iter()
            .map(serde_json::to_string)
            .collect::<Result<_, _>>()?;
        lines.iter().map(|l| format!("{l}\n")).collect()
    } else {
        ctl::format_events(&events)
    };
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        // `fleetsim events | head` is not an error.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other.context("writing the events to stdout"),
    }
}
