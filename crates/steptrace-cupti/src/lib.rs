//! Device activity from CUPTI, for steptrace: kernels, copies, memsets, launches and
//! synchronisations, as plain Rust records. burn-free; it talks to CUPTI through cudarc
//! 0.19's `cupti` bindings and needs no change to cubecl.
//!
//! # Life cycle
//!
//! 1. [`probe`] says whether `libcupti` loads, its `cuptiGetVersion`, and whether the
//!    callback API is free; when not, it gives a reason. It needs no CUDA device, makes no
//!    CUPTI call before checking that the library and every symbol used are present
//!    (cudarc's loader panics otherwise), and never panics.
//! 2. [`Collector::start`] registers the activity buffer callbacks. It may (and should) run
//!    before any CUDA context exists: CUPTI then covers contexts created later. CUPTI is
//!    process-wide, so a second `start` while a collector exists returns
//!    [`CuptiError::AlreadyStarted`].
//! 3. [`Collector::enable`] opens a window (call it where a profiler cycle's warmup
//!    starts): it reads the clocks and enables the configured kinds.
//! 4. [`Collector::disable_and_flush`] closes it: kinds off, `cuptiActivityFlushAll`, and a
//!    [`Window`] with every record since `enable`, the dropped-record count, and the
//!    clock pairs for a [`ClockMap`]. Synchronise the device first.
//! 5. Dropping the collector turns off whatever it turned on.
//!
//! ```
//! use steptrace_cupti::{probe, Collector, CollectorConfig};
//!
//! let found = probe();
//! if !found.is_available() {
//!     println!("no device activity: {}", found.reason().unwrap_or_default());
//!     return;
//! }
//! let mut collector = Collector::start(CollectorConfig::default()).expect("CUPTI is available");
//! collector.enable().expect("window opens");
//! // ... CUDA work, then a device synchronisation ...
//! let window = collector.disable_and_flush().expect("window closes");
//! let clocks = window.clock_map();
//! println!("{} kernels, drift {:.2} ppm", window.kernels.len(), clocks.drift_ppm());
//! ```
//!
//! # Launch records: the callback API by default
//!
//! A kernel record says when the kernel ran; the launch record says which host thread
//! asked for it and when. Both carry the same correlation id. CUPTI offers two sources:
//!
//! - The `DRIVER` activity kind records **every** driver call. Measured on the H200 with
//!   burn's MLP (2 ms steps, 183 driver calls and 33 kernels per step), enabling it on top of
//!   kernels and copies raised the step time by 2.8–5.6%, against 1.4% for kernels and
//!   copies alone. `cuptiActivityEnableDriverApi(cuLaunchKernel)` without the `DRIVER` kind
//!   produced no records there, so the kind cannot be narrowed to launches.
//! - The callback API (`cuptiSubscribe` and `cuptiEnableCallback` on
//!   `CUPTI_CB_DOMAIN_DRIVER_API`) can be enabled for chosen callback ids. This crate
//!   enables only the launch ids (`cuLaunchKernel`, `cuLaunchKernelEx`, their `_ptsz`
//!   forms, and the cooperative launches), so the other ~150 driver calls per step cost
//!   nothing. At entry and exit the handler reads `cuptiGetTimestamp` and, at exit, pushes a
//!   [`Launch`] with the correlation id and the calling thread ([`HostThread`]: a stable
//!   per-thread number and Rust's thread name; cubecl launches on its `DSU-…`/`DSD-…`
//!   device thread, not on the training thread).
//!
//! Measured on the H200 with `examples/smoke.rs` (CUPTI 13.0, 2026-12-01): a loop of
//! tiny kernel launches through cudarc's safe API, which makes about 11 other driver calls
//! per launch (event records, stream waits), 9 interleaved pairs of 2000 launches:
//!
//! | enabled (alone) | added host time per launch (median) |
//! | --- | --- |
//! | callback-API launch records | +0.12 µs |
//! | `DRIVER` activity kind | +1.08 µs (about 90 ns per driver call) |
//! | kernels + memcpy + memset | +0.72 µs |
//! | kernels + memcpy + memset + callback launches | +1.01 µs |
//! | kernels + memcpy + memset + `DRIVER` | +1.72 µs |
//!
//! For burn's step above (33 launches, 183 driver calls), that is about 4 µs per step for
//! callback launch records against about 16 µs for `DRIVER` (an estimate from the loop,
//! not a measurement on burn). In every window, every kernel had a launch record with its
//! correlation id, and no launch started after its kernel. A timestamp read
//! (`cuptiGetTimestamp`) costs about 60 ns there; reading the host clock in the handler
//! instead made no measurable difference, so launch records use CUPTI's clock directly.
//!
//! [`LaunchRecords::Callback`] is therefore the default, aiming at the ≤3% budget.
//! [`LaunchRecords::DriverActivity`] remains as an option (records are filtered to launch
//! ids as they are read; threads are OS ids named from `/proc`, so threads that have
//! exited by the window's close stay unnamed). Only one client may hold CUPTI's callback
//! API: if another one (Nsight Systems, PyTorch's profiler) does,
//! [`Collector::launch_source`] reports it as [`LaunchSource::Unavailable`] with
//! [`CuptiError::OtherSubscriber`], and kernels, copies and memsets are still collected
//! (checked on the H200 with a second subscriber in the same process).
//!
//! # Record layouts
//!
//! This machine has no nvcc, so cudarc builds with its newest CUDA 13 bindings (13.4); the
//! H200 runs CUPTI 13.0. The parser reads each record's kind first, as a plain `u32`, then
//! only fields of the part every CUDA 13 record version shares (`CUpti_ActivityKernel10`,
//! what CUPTI 13.0 writes; versions 11 to 13 append fields). See `src/parse.rs`.
//!
//! # Clocks
//!
//! Record timestamps are nanoseconds on CUPTI's clock. A window reads a [`ClockPair`] at
//! open and at close (`cuptiGetTimestamp` between two `Instant::now()` calls); the
//! [`ClockMap`] fitted through them maps CUPTI time to host `Instant`s, with drift in ppm.
//! On the H200 a pairing's bracket was 60–100 ns (error ≤ half of it); over windows of a
//! few milliseconds the fitted drift was within ±4 ppm with an uncertainty of ±20–36 ppm,
//! so short windows fix the offset well and the rate only loosely.
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

mod buffers;
mod clock;
mod collector;
mod device;
mod error;
mod ffi;
mod launch;
mod parse;
mod probe;
mod records;
mod window;

pub use clock::{ClockMap, ClockPair};
pub use collector::{Collector, CollectorConfig, LaunchRecords};
pub use device::{device_info, DeviceInfo};
pub use error::{CuptiError, ResultCode};
pub use probe::{probe, CallbackApi, Probe};
pub use records::{HostThread, Kernel, Launch, Memcpy, MemcpyKind, Memset, SyncKind, Synchronization};
pub use window::{LaunchSource, Window};
