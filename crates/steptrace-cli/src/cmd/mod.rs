//! One module per subcommand.

pub mod backends;
pub mod inspect;
pub mod plot;
pub mod report;
pub mod train;
