//! One module per subcommand.

pub mod backends;
pub mod bench;
pub mod compare;
pub mod inspect;
pub mod plot;
pub mod report;
pub mod train;
