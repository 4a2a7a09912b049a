//! The one distinction `main` needs from an error: did the operator ask for
//! something invalid (exit 2: usage, inventory or plan refused), or did the
//! work fail at runtime (exit 1)?

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

/// Shorthand: `return Err(usage!("..."))`.
#[macro_export]
macro_rules! usage {
    ($($arg:tt)*) => {
        anyhow::Error::new($crate::error::UsageError(format!($($arg)*)))
    };
}

/// The exit code for an error chain: 2 when any link is a [`UsageError`].
pub fn exit_code(err: &anyhow::Error) -> i32 {
    if err
        .chain()
        .any(|e| e.downcast_ref::<UsageError>().is_some())
    {
        2
    } else {
        1
    }
}
