//! On-demand capture: a run that is ready but recording nothing is asked,
//! from another process or from its own code, to record its next cycle.
//!
//! A run whose schedule is [`Schedule::on_demand`](crate::Schedule::on_demand)
//! (`--schedule on-demand`) writes `DIR/.steptrace-capture/PID.ready.json`
//! in its trace directory and listens for `SIGUSR1`. To ask it,
//! [`ask`] (what `steptrace capture PID` calls) checks that the pid is the
//! run that wrote the ready file, leaves `PID.request.json` beside it
//! (never over a request that is still waiting), and sends `SIGUSR1`.
//!
//! Why a signal and a file: no socket, no network and no thread of
//! steptrace's own wait for requests. The signal handler only raises a
//! flag; the profiler reads the flag, one atomic load, at each step
//! boundary, so between captures a step costs what a wait step costs. The
//! file carries what a signal cannot (how many steps, who asked) and the
//! answers go back the same way: the ready file says whether the request
//! was accepted (and which steps it will record), then where the trace was
//! saved, or why nothing was.
//!
//! A capture is the schedule's `warmup` steps from the step after the
//! request was read, then its `active` steps (or the request's), saved as a
//! cycle like any other, with `capture` in its manifest: asked by whom,
//! when, and read at which step. A request while a capture records is
//! refused with what is recording; a run that ends inside a capture saves
//! it cut short.

mod ask;
mod files;
mod listen;

pub use ask::{ask, Asked, CaptureError, Progress};
pub use files::{process_start, Answer, Paths, Ready, Request, State, Steps, FOLDER};
pub use listen::CaptureHandle;
pub(crate) use listen::OnDemand;
