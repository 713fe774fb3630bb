//! One module per subcommand.

pub mod backends;
pub mod bench;
pub mod capture;
pub mod compare;
mod failure;
pub mod inspect;
pub mod peaks;
pub mod plot;
pub mod report;
pub mod train;
