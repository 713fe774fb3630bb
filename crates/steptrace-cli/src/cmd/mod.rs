//! One module per subcommand.

pub mod backends;
pub mod train;
