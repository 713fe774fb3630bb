//! Times one long recorded window end to end: `N` steps of a few spans each
//! under `wait=0,warmup=1,active=N,repeat=1`, then `finish()` (which
//! finalises the file), against the same steps with no profiler.
//!
//! ```sh
//! cargo run --release -p steptrace --example long_window -- 1000 10000 100000
//! ```
//!
//! Prints one line per size: steps, ms for the unprofiled steps, ms for the
//! profiled steps, ms for `finish()`, file bytes, the process's peak
//! resident memory (`VmHWM`, Linux only) at the window's end, before
//! `finish()` (what the channel to the writer thread held at most) and after
//! it (the finaliser reads the file back), and the writer waits the trace
//! records (events whose thread waited for the writer, and for how long).
//!
//! Run each size in its own process to read its peaks alone: `VmHWM` only
//! grows.

use std::time::{Duration, Instant};

use steptrace::{Profiler, Schedule};
use tracing_subscriber::prelude::*;

fn step_work() {
    let _train = tracing::info_span!(target: "steptrace", "train.step").entered();
    for _ in 0..4 {
        let _phase = tracing::info_span!(target: "steptrace", "forward").entered();
        std::hint::black_box((0..200u64).sum::<u64>());
    }
}

fn peak_rss_kb() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let sizes: Vec<u64> = std::env::args().skip(1).map(|a| a.parse()).collect::<Result<_, _>>()?;
    let sizes = if sizes.is_empty() { vec![1_000, 10_000, 100_000] } else { sizes };
    println!(
        "steps\tunprofiled_ms\tprofiled_ms\tfinish_ms\tfile_bytes\twindow_peak_rss_kb\tpeak_rss_kb\twaits\twaited_ms"
    );
    for n in sizes {
        let plain = Instant::now();
        for _ in 0..=n {
            step_work();
        }
        let plain = plain.elapsed();

        let dir = tempfile::tempdir()?;
        let schedule: Schedule = format!("wait=0,warmup=1,active={n},repeat=1").parse()?;
        let (layer, mut profiler) = Profiler::builder(schedule).out_dir(dir.path()).worker("long").build()?;
        let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
        let (stepped, window_rss, finished, saved) = tracing::dispatcher::with_default(&dispatch, || {
            let started = Instant::now();
            profiler.start();
            for _ in 0..=n {
                step_work();
                profiler.step();
            }
            let stepped = started.elapsed();
            let window_rss = peak_rss_kb();
            let finishing = Instant::now();
            let saved = profiler.finish();
            (stepped, window_rss, finishing.elapsed(), saved)
        });
        let saved = saved?;
        let bytes: u64 = saved.iter().map(|s| s.bytes).sum();
        let kb = |v: Option<u64>| v.map_or_else(|| "n/a".to_owned(), |kb| kb.to_string());
        let (window_rss, rss) = (kb(window_rss), kb(peak_rss_kb()));
        let trace = steptrace::reader::read_trace_file(&saved[0].path)?;
        let waits = &trace.metadata["metadata"]["writer_waits"];
        let waited_ms = waits["waited_us"].as_u64().unwrap_or(0) as f64 / 1000.0;
        println!(
            "{n}\t{:.1}\t{:.1}\t{:.1}\t{bytes}\t{window_rss}\t{rss}\t{}\t{waited_ms:.1}",
            ms(plain),
            ms(stepped),
            ms(finished),
            waits["waits"]
        );
    }
    Ok(())
}
