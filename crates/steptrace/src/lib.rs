//! steptrace core (work in progress).
pub mod hygiene;
pub mod reader;
