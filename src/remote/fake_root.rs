//! A fake node for the scripts' round-trip tests: a directory standing in
//! for `/` and a `bin` of fake tools printing real tools' output. The
//! scripts are this module's; the tests that parse what they print live
//! beside the parsers (`node::script_output_tests`,
//! `checks::checks_script_tests`), so `remote` imports nothing above it.

use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The PATH line of `prelude.sh`, replaced so only the fake tools are found.
pub(crate) const PATH_LINE: &str = "PATH=/usr/sbin:/usr/bin:/sbin:/bin:/opt/bin:$PATH";

/// Runs `script` with `sh -c` under `path_env`; stdout and stderr together
/// as the prelude prints them.
pub(crate) fn sh(script: &str, path_env: &str) -> String {
    let out = Command::new("/bin/sh")
        .arg("-c")
        .arg(script)
        .env("PATH", path_env)
        .output()
        .expect("sh runs");
    assert!(out.status.success(), "script failed: {out:?}");
    String::from_utf8(out.stdout).expect("utf-8 output")
}

/// A fake node: a directory standing in for `/`, and a `bin` of fake tools.
pub(crate) struct FakeRoot {
    dir: tempfile::TempDir,
}

impl FakeRoot {
    pub(crate) fn new() -> Self {
        let fake = FakeRoot {
            dir: tempfile::tempdir().unwrap(),
        };
        fs::create_dir_all(fake.bin()).unwrap();
        fake
    }

    pub(crate) fn root(&self) -> &Path {
        self.dir.path()
    }

    pub(crate) fn bin(&self) -> PathBuf {
        self.root().join("fake-bin")
    }

    pub(crate) fn file(&self, path: &str, content: &str) -> &Self {
        let full = self.root().join(path.trim_start_matches('/'));
        fs::create_dir_all(full.parent().unwrap()).unwrap();
        fs::write(full, content).unwrap();
        self
    }

    pub(crate) fn symlink(&self, path: &str, target: &str) -> &Self {
        let full = self.root().join(path.trim_start_matches('/'));
        fs::create_dir_all(full.parent().unwrap()).unwrap();
        symlink(target, full).unwrap();
        self
    }

    /// A fake tool: a shell script body.
    pub(crate) fn tool(&self, name: &str, body: &str) -> &Self {
        let path = self.bin().join(name);
        fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
        self
    }

    /// Runs `script` with its absolute paths moved under the fake root, and
    /// returns the output with the fake root's path taken back out.
    pub(crate) fn run(&self, script: &str) -> String {
        let root = self.root().display().to_string();
        let mut rooted = script.replace(
            PATH_LINE,
            &format!("PATH={}:/usr/bin:/bin", self.bin().display()),
        );
        for dir in ["/etc/", "/opt/", "/run/", "/proc/", "/sys/", "/var/"] {
            rooted = rooted
                .replace(&format!(" {dir}"), &format!(" {root}{dir}"))
                .replace(&format!("\"{dir}"), &format!("\"{root}{dir}"))
                .replace(&format!("\t{dir}"), &format!("\t{root}{dir}"));
        }
        sh(&rooted, "/usr/bin:/bin").replace(&root, "")
    }
}
