//! Placeholder for the emulated tools; replaced by the tools branch.

/// Runs the emulated tool `name` and returns its exit code, or `None` when
/// `name` is not a tool. Replaced by the tools branch.
pub fn dispatch(_name: &str, _args: &[String]) -> Option<i32> {
    None
}
