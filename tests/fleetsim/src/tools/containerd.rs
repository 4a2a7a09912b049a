//! `containerd --version` of the merged containerd sysext: what the real
//! binary prints (`containerd <module> <version> <revision>`, with the Go
//! module of its major, `github.com/containerd/containerd/v2` from 2.0 on),
//! at the version of the image it came from. The daemon itself is not run:
//! anything else is unsupported.

use anyhow::{Result, bail};

use super::util::hex_of;
use super::{Env, say};

const NAME: &str = "containerd";

pub fn run(env: &mut Env, args: &[String]) -> Result<i32> {
    let ([flag], Some(version)) = (args, env.tool_version.clone()) else {
        if env.tool_version.is_none() {
            bail!("this is fleetsim's internal containerd; run the sysext's /usr/bin/containerd");
        }
        return Ok(env.unsupported(NAME, args));
    };
    if flag != "--version" && flag != "-v" {
        return Ok(env.unsupported(NAME, args));
    }
    let module = if version.starts_with("1.") {
        "github.com/containerd/containerd"
    } else {
        "github.com/containerd/containerd/v2"
    };
    say!(
        env,
        "containerd {module} v{version} {}",
        hex_of(&format!("containerd v{version}"), 40)
    );
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::super::testutil::Node;

    #[test]
    fn prints_the_release_as_containerd_does() {
        let node = Node::worker("w1", "v1.34.2");
        let r = node.run_image("2.1.4", "containerd", &["--version"]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        let words: Vec<&str> = r.stdout.split_whitespace().collect();
        assert_eq!(
            words[..3],
            [
                "containerd",
                "github.com/containerd/containerd/v2",
                "v2.1.4"
            ]
        );
        assert_eq!(words[3].len(), 40);
        let r = node.run_image("1.7.27", "containerd", &["--version"]);
        assert!(
            r.stdout
                .starts_with("containerd github.com/containerd/containerd v1.7.27 ")
        );
        let r = node.run_image("2.1.4", "containerd", &["--config", "/x"]);
        assert_eq!(r.code, 1);
    }
}
