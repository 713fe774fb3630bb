//! Console lines that fit a 100-column terminal (steptrace-burn's: the command and a
//! session say things alike).

pub use steptrace::terminal::{fit, hang, out, say, table, warn, WIDTH};
