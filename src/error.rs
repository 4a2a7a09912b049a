//! The one distinction `main` needs from an error: did the operator ask for
//! something invalid (exit 2: usage, inventory or plan refused), did the
//! work fail at runtime (exit 1), or did it stop because the maintenance
//! window does not leave time for the next node (exit 75, sysexits'
//! EX_TEMPFAIL: nothing failed, run again in the next window)?

use std::fmt;

/// An error in what the operator gave us: bad flags, a bad inventory, a
/// plan the rules refuse. Nothing was changed on any node.
#[derive(Debug)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// apply or reboot stopped between nodes, or did not start, because the
/// maintenance window is closed or closes before the next node could be
/// done. The fleet is consistent; a run in the next window resumes.
#[derive(Debug)]
pub struct OutsideWindow(pub String);

impl fmt::Display for OutsideWindow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for OutsideWindow {}

/// The exit code of [`OutsideWindow`]: "try again later" to cron and
/// systemd alike.
pub const EXIT_OUTSIDE_WINDOW: i32 = 75;

/// Shorthand: `return Err(usage!("..."))`.
#[macro_export]
macro_rules! usage {
    ($($arg:tt)*) => {
        anyhow::Error::new($crate::error::UsageError(format!($($arg)*)))
    };
}

/// The exit code for an error chain: 2 when any link is a [`UsageError`],
/// 75 when one is an [`OutsideWindow`], else 1.
pub fn exit_code(err: &anyhow::Error) -> i32 {
    if err
        .chain()
        .any(|e| e.downcast_ref::<UsageError>().is_some())
    {
        2
    } else if err
        .chain()
        .any(|e| e.downcast_ref::<OutsideWindow>().is_some())
    {
        EXIT_OUTSIDE_WINDOW
    } else {
        1
    }
}
