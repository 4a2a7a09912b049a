//! Tests of the clap definitions: their own file, so the command line's
//! definition reads as one piece under the 500-line bound.

use super::*;
use clap::CommandFactory;

#[test]
fn cli_definition_is_consistent() {
    Cli::command().debug_assert();
}

#[test]
fn durations() {
    assert_eq!(parse_duration("90s").unwrap(), Duration::from_secs(90));
    assert_eq!(parse_duration("15m").unwrap(), Duration::from_secs(900));
    assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
    assert!(parse_duration("soon").unwrap_err().contains("use e.g. 90s"));
}

#[test]
fn sizes() {
    assert_eq!(parse_size("8GiB"), Ok(8 << 30));
    assert_eq!(parse_size("512 MiB"), Ok(512 << 20));
    assert_eq!(parse_size("1048576"), Ok(1 << 20));
    assert_eq!(parse_size("2g"), Ok(2 << 30));
    for bad in ["", "0", "GiB", "8 GB", "-1", "1.5GiB", "99999999999TiB"] {
        assert!(parse_size(bad).is_err(), "{bad:?}");
    }
    let cli = Cli::try_parse_from(["fleetctl", "apply"]).unwrap();
    let Command::Apply(a) = cli.command else {
        panic!("not apply")
    };
    assert_eq!(a.etcd_snapshot_max, 8 << 30);
}

#[test]
fn targets_parse_on_the_command_line() {
    let cli = Cli::try_parse_from(["fleetctl", "plan", "1.37"]).unwrap();
    let Command::Plan(p) = cli.command else {
        panic!("not plan")
    };
    assert_eq!(p.target.unwrap().to_string(), "v1.37");
    assert!(Cli::try_parse_from(["fleetctl", "plan", "v1"]).is_err());
}
