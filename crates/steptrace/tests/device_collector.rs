//! What the profiler tells a device collector at each window's end: in how many steps the
//! next window opens, so that a collector whose start-up is dear may stay on in between.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use steptrace::device::{DeviceCollector, DeviceError, DeviceWindow};
use steptrace::{Profiler, Schedule};
use tracing_subscriber::prelude::*;

/// Logs every call the profiler makes.
struct Log(Arc<Mutex<Vec<String>>>);

impl DeviceCollector for Log {
    fn open(&mut self) -> Result<(), DeviceError> {
        self.0.lock().unwrap().push("open".into());
        Ok(())
    }
    fn next_window_in(&mut self, steps: Option<u64>) {
        self.0.lock().unwrap().push(format!("next {steps:?}"));
    }
    fn close(&mut self, _origin: Instant) -> Result<DeviceWindow, DeviceError> {
        self.0.lock().unwrap().push("close".into());
        Ok(DeviceWindow::default())
    }
}

/// Runs `steps` steps under `schedule` and returns the collector's calls.
fn calls(schedule: Schedule, steps: u64) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let (layer, mut profiler) = Profiler::builder(schedule)
        .out_dir(dir.path())
        .device_collector(Box::new(Log(log.clone())))
        .build_global()
        .unwrap();
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    tracing::dispatcher::with_default(&dispatch, || {
        profiler.start();
        for _ in 0..steps {
            profiler.step();
        }
        profiler.finish().unwrap();
    });
    let calls = log.lock().unwrap().clone();
    calls
}

#[test]
fn each_window_end_says_how_far_the_next_window_is() {
    // Cycles of 2 wait, 1 warmup, 2 active, three times: after the first two windows the
    // next warmup is 2 steps away (the step after the close is the first wait step, 0 steps
    // away); after the last there is none.
    let got = calls("wait=2,warmup=1,active=2,repeat=3".parse().unwrap(), 20);
    let want = ["open", "next Some(2)", "close", "open", "next Some(2)", "close", "open", "next None", "close"];
    assert_eq!(got, want);

    // With no wait, the next cycle's warmup is the very next step.
    let got = calls("wait=0,warmup=1,active=1,repeat=2".parse().unwrap(), 10);
    assert_eq!(got, ["open", "next Some(0)", "close", "open", "next None", "close"]);
}

#[test]
fn a_window_cut_by_finish_or_far_from_the_next_gets_none() {
    // Finished inside the first window.
    let got = calls("wait=1,warmup=1,active=5,repeat=0".parse().unwrap(), 3);
    assert_eq!(got, ["open", "next None", "close"]);
    // The next window more than 1024 steps away is "none planned" for the collector.
    let got = calls("wait=2000,warmup=1,active=1,repeat=2".parse().unwrap(), 2004);
    assert_eq!(got, ["open", "next None", "close"]);
}

#[test]
fn on_demand_never_says_when_the_next_capture_comes() {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let (layer, mut profiler) = Profiler::builder(Schedule::on_demand(1, 2).unwrap())
        .out_dir(dir.path())
        .device_collector(Box::new(Log(log.clone())))
        .build_global()
        .unwrap();
    let handle = profiler.capture_handle().unwrap();
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    tracing::dispatcher::with_default(&dispatch, || {
        profiler.start();
        profiler.step();
        handle.request(None, "the test");
        for _ in 0..8 {
            profiler.step();
        }
        profiler.finish().unwrap();
    });
    assert_eq!(*log.lock().unwrap(), ["open", "next None", "close"]);
}
