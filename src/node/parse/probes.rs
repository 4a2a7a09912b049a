//! Any script's probes by name, for callers that judge each output
//! themselves (the Ceph gate reads JSON; `crate::checks::ceph`).

use anyhow::Result;

use super::sections::Sections;

/// One `Ok(stdout)` per name in `names` when that probe exited 0, else
/// `Err` saying why (its exit status and stderr, or that it never ran).
/// An error when the script printed no section at all.
pub fn parse_probes(
    script: &str,
    output: &str,
    names: &[&str],
) -> Result<Vec<Result<String, String>>> {
    let sections = Sections::of_script(script, output)?;
    Ok(names
        .iter()
        .map(|name| {
            sections
                .succeeded(name, name)
                .map(|s| s.stdout.clone())
                .map_err(|e| e.to_string())
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_probe_is_its_output_or_why_not() {
        let out = "@@fleetctl:begin a@@\n{}\n@@fleetctl:stderr@@\n@@fleetctl:end 0@@\n\
                   @@fleetctl:begin b@@\n\n@@fleetctl:stderr@@\nno such thing\n@@fleetctl:end 1@@\n";
        let got = parse_probes("x", out, &["a", "b", "c"]).unwrap();
        assert_eq!(got[0], Ok("{}".to_string()));
        assert!(got[1].as_ref().unwrap_err().contains("no such thing"));
        assert!(got[2].as_ref().unwrap_err().contains("never ran"));
        assert!(parse_probes("x", "sudo: nope", &["a"]).is_err());
    }
}
