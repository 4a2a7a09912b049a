//! `kubelet --version`: the version of the binary being run, i.e. of the
//! sysext image it came from. `/usr/bin/kubelet` exists only through the
//! image merged at the last boot, so it reports that version — not the
//! staged one — which is how "staged is not running" shows up to fleetctl.

use anyhow::Result;

use super::{Env, say};

const NAME: &str = "kubelet";

pub fn run(env: &mut Env, args: &[String]) -> Result<i32> {
    match args {
        [a] if a == "--version" || a == "--version=true" => {
            let version = env.binary_version(NAME)?;
            say!(env, "Kubernetes {version}");
            Ok(0)
        }
        _ => Ok(env.unsupported(NAME, args)),
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::Node;

    #[test]
    fn reports_the_version_of_its_image() {
        let node = Node::worker("w1", "v1.34.2");
        let r = node.run("kubelet", &["--version"]);
        assert_eq!((r.code, r.stdout.as_str()), (0, "Kubernetes v1.34.2\n"));
        // A staged image's kubelet, run from where it is mounted.
        let r = node.run_image("v1.35.1", "kubelet", &["--version"]);
        assert_eq!((r.code, r.stdout.as_str()), (0, "Kubernetes v1.35.1\n"));
    }
}
