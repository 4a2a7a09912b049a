//! When apply may start the next node: maintenance windows, the alert gate
//! and the soak between nodes. Pure decisions; `steps` does the waiting.

pub mod alerts;
pub mod window;

pub use alerts::{Alert, Filter};
pub use window::{Fit, Window};
