//! `kubelet --version`: the kubelet binary comes from the sysext merged at
//! the last boot, so it reports that version — not the staged one — which
//! is how "staged is not running" shows up to fleetctl.

use anyhow::Result;

use super::{Env, say};

const NAME: &str = "kubelet";

pub fn run(env: &mut Env, args: &[String]) -> Result<i32> {
    match args {
        [a] if a == "--version" || a == "--version=true" => {
            let boot = env.boot()?;
            say!(env, "Kubernetes {}", boot.kubernetes);
            Ok(0)
        }
        _ => Ok(env.unsupported(NAME, args)),
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::Node;

    #[test]
    fn reports_the_version_merged_at_boot() {
        let node = Node::worker("w1", "v1.34.2");
        let r = node.run("kubelet", &["--version"]);
        assert_eq!((r.code, r.stdout.as_str()), (0, "Kubernetes v1.34.2\n"));
        assert_eq!(node.run("kubelet", &["--config=/x"]).code, 1);
    }
}
