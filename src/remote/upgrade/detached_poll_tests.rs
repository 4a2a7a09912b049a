//! The poll of a detached step (`poll_detached`), run by `sh` against a
//! scripted `systemctl` and a steps directory of the test's own.

use std::path::PathBuf;

use super::tests::{executable, sh_env};
use super::*;

/// A test's own directory with `steps/` (the steps' results) and `bin/`
/// (the scripted `systemctl`, put first on `PATH`).
fn dirs() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let steps = dir.path().join("steps");
    std::fs::create_dir(&steps).unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    (dir, steps, bin)
}

#[test]
fn a_poll_waits_on_the_node_for_the_step_to_end() {
    let (_dir, steps, bin) = dirs();
    // The unit is active until its result is written.
    executable(
        &bin.join("systemctl"),
        &format!(
            "#!/bin/sh\n[ -f {0}/t.exit ] && echo inactive || echo active\n",
            steps.display()
        ),
    );
    let poll = |tenths| poll_detached("t", tenths).replace(STEPS_DIR, steps.to_str().unwrap());
    let (_, out, _) = sh_env(&poll(0), "", Some(&bin));
    assert_eq!(out, "running active\n", "no waiting asked for");
    // The step ends while the poll waits: its result comes back.
    let finish = format!(
        "(sleep 0.3; echo done > {0}/t.log; echo 0 > {0}/t.exit) & {1}",
        steps.display(),
        poll(50)
    );
    let (_, out, _) = sh_env(&finish, "", Some(&bin));
    assert_eq!(out, "exit 0\ndone\n");
    // A unit that is gone with no result: no waiting, `none`.
    std::fs::remove_file(steps.join("t.exit")).unwrap();
    executable(&bin.join("systemctl"), "#!/bin/sh\necho inactive\nexit 3\n");
    let (_, out, _) = sh_env(&poll(50), "", Some(&bin));
    assert_eq!(out, "none\n");
}

/// While the step runs, systemd is asked once a second whether its unit
/// still runs, not at every tenth: a `systemctl` is a process and a call to
/// PID 1.
#[test]
fn a_poll_asks_systemd_once_a_second_while_it_waits() {
    let (dir, steps, bin) = dirs();
    let asked = dir.path().join("asked");
    executable(
        &bin.join("systemctl"),
        &format!(
            "#!/bin/sh\necho x >> {1}\n[ -f {0}/t.exit ] && echo inactive || echo active\n",
            steps.display(),
            asked.display()
        ),
    );
    let poll = poll_detached("t", 50).replace(STEPS_DIR, steps.to_str().unwrap());
    let finish = format!(
        "(sleep 1.5; echo done > {0}/t.log; echo 0 > {0}/t.exit) & {1}",
        steps.display(),
        poll
    );
    let (_, out, _) = sh_env(&finish, "", Some(&bin));
    assert_eq!(out, "exit 0\ndone\n");
    // At the start, after one second, and once more for the answer: not
    // the fifteen or so of a question at every tenth.
    let times = std::fs::read_to_string(&asked).unwrap().lines().count();
    assert!((2..=4).contains(&times), "systemctl ran {times} times");
}
