//! The book's chapters, compiled as doctests.
//!
//! mdBook's own `mdbook test` cannot link the workspace's crates, so every
//! chapter is included here as the documentation of an empty module:
//! `cargo test -p steptrace-tests --doc` compiles and runs its `rust` blocks
//! against the real dependencies. Chapters whose blocks are all `sh` or
//! `text` produce no tests, but stay listed so that a Rust block added to
//! them later is tested too.

#[cfg(doctest)]
#[doc = include_str!("../../book/src/introduction.md")]
mod introduction {}

#[cfg(doctest)]
#[doc = include_str!("../../book/src/first-run.md")]
mod first_run {}

#[cfg(doctest)]
#[doc = include_str!("../../book/src/one-question.md")]
mod one_question {}

#[cfg(doctest)]
#[doc = include_str!("../../book/src/boundaries-and-units.md")]
mod boundaries_and_units {}

#[cfg(doctest)]
#[doc = include_str!("../../book/src/host-device-waiting.md")]
mod host_device_waiting {}

#[cfg(doctest)]
#[doc = include_str!("../../book/src/startup-and-steady-state.md")]
mod startup_and_steady_state {}

#[cfg(doctest)]
#[doc = include_str!("../../book/src/reading-a-trace.md")]
mod reading_a_trace {}

#[cfg(doctest)]
#[doc = include_str!("../../book/src/report.md")]
mod report {}

#[cfg(doctest)]
#[doc = include_str!("../../book/src/cheap-and-clean.md")]
mod cheap_and_clean {}

#[cfg(doctest)]
#[doc = include_str!("../../book/src/observation-to-hypothesis.md")]
mod observation_to_hypothesis {}

#[cfg(doctest)]
#[doc = include_str!("../../book/src/confirming.md")]
mod confirming {}

#[cfg(doctest)]
#[doc = include_str!("../../book/src/own-program.md")]
mod own_program {}

#[cfg(doctest)]
#[doc = include_str!("../../book/src/multi-gpu.md")]
mod multi_gpu {}
#[cfg(doctest)]
#[doc = include_str!("../../book/src/learner.md")]
mod learner {}
