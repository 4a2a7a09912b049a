use std::process::ExitCode;

use clap::Parser;

use fleetctl::cli::Cli;
use fleetctl::ui::Printer;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let printer = Printer::new(cli.global.no_color, cli.global.verbose);
    // Before the runtime's threads exist: one open connection per node needs
    // more descriptors than the usual soft limit of 1,024 (see limits.rs).
    fleetctl::limits::raise_open_files();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            fleetctl::ui::err_line(&format!(
                "fleetctl: error: cannot start the async runtime: {e}"
            ));
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(fleetctl::commands::run(cli, &printer)) {
        Ok(code) => code,
        Err(err) => {
            // Every error path ends here: secrets masked, control
            // characters escaped, and a hung-up terminal (SIGHUP, EIO)
            // costs the message, never a panic.
            fleetctl::ui::error(&format!("{err:#}"));
            ExitCode::from(fleetctl::error::exit_code(&err) as u8)
        }
    }
}
