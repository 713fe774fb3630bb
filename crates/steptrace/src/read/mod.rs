//! Reading traces back: the [`reader`] parses files (ours and others'),
//! [`analysis`] turns them into a report, and [`bench`](mod@bench) holds results
//! measured outside the profiler and their comparison, and [`hygiene`] flags
//! labels that would leak secrets, private paths or input content (the
//! sink and `inspect` share its one scanner).

pub mod analysis;
pub mod bench;
pub mod hygiene;
pub mod reader;
