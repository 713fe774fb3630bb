//! On-demand capture: a run that is ready but recording nothing is asked,
//! from another process or from its own code, to record its next cycle.
//!
//! A run whose schedule is [`Schedule::on_demand`](crate::Schedule::on_demand)
//! (`--schedule on-demand`) writes `DIR/.steptrace-capture/PID.ready.json`
//! in its trace directory, with a random token in `PID.token` that it holds
//! open, and listens for `SIGUSR1`. To ask it, [`ask`] (what
//! `steptrace capture PID` calls) checks that the pid is the run that wrote
//! the ready file, leaves `PID.request.json` beside it with the token
//! (never over a request that is still waiting), and sends `SIGUSR1`.
//! [`locate`] finds the trace directory from the process itself.
//!
//! The trace directory may be shared with other users; the capture folder
//! in it may not. The run creates it with mode 0700, refuses one that is a
//! link, is another user's, or that others can write to, and then uses it
//! through its descriptor. Both sides open its files without following a
//! link or blocking, read them only if they are regular files of the
//! expected user, and never read more than 1 MiB of one; new files are
//! created exclusively and renamed or linked into place.
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
mod error;
mod files;
mod folder;
mod listen;
mod process;

pub use ask::{ask, Asked, CaptureError, Progress};
pub use files::{Answer, Paths, Ready, Request, State, Steps, FOLDER};
pub use listen::CaptureHandle;
pub(crate) use listen::OnDemand;
pub use process::{locate, process_start};
