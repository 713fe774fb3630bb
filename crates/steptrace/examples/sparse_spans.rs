//! The caller's cost of one recorded span when spans are sparse (as in a
//! training step: a few spans per millisecond, so tracing-chrome's writer
//! thread sleeps between them) against back to back (the writer stays busy).
//!
//! ```sh
//! cargo run --release -p steptrace --example sparse_spans -- 20000 50
//! ```
//!
//! Arguments: spans per setting, and the gap between sparse spans in µs.
//! Prints, per setting, the median and p90 of the time one
//! `info_span!(..).entered()` plus its drop takes on the calling thread.

use std::time::{Duration, Instant};

use steptrace::{Profiler, Schedule};
use tracing_subscriber::prelude::*;

fn spin(d: Duration) {
    let start = Instant::now();
    while start.elapsed() < d {
        std::hint::spin_loop();
    }
}

fn quantiles(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[v.len() * 9 / 10])
}

/// Spans per step: `profiler.step()` after every this many (a training
/// step has about a dozen).
const SPANS_PER_STEP: usize = 12;

fn measure(profiler: &mut Profiler, n: usize, gap: Duration) -> Vec<f64> {
    (0..n)
        .map(|i| {
            if i % SPANS_PER_STEP == 0 {
                profiler.step();
            }
            spin(gap);
            let t = Instant::now();
            drop(tracing::info_span!(target: "steptrace", "forward").entered());
            t.elapsed().as_nanos() as f64
        })
        .collect()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<u64> = std::env::args().skip(1).map(|a| a.parse()).collect::<Result<_, _>>()?;
    let n = *args.first().unwrap_or(&20_000) as usize;
    let gap = Duration::from_micros(*args.get(1).unwrap_or(&50));
    let dir = tempfile::tempdir()?;
    let schedule: Schedule = "wait=0,warmup=1,active=1000000000".parse()?;
    let (layer, mut profiler) =
        Profiler::builder(schedule).out_dir(dir.path()).max_file_bytes(1 << 30).build_global()?;
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    tracing::dispatcher::with_default(&dispatch, || {
        profiler.start();
        profiler.step();
        for round in 0..2 {
            let (m, p) = quantiles(measure(&mut profiler, n, Duration::ZERO));
            println!("round {round} back_to_back: median {m:.0} ns, p90 {p:.0} ns");
            let (m, p) = quantiles(measure(&mut profiler, n, gap));
            println!("round {round} sparse ({} us gaps): median {m:.0} ns, p90 {p:.0} ns", gap.as_micros());
        }
    });
    drop(profiler);
    Ok(())
}
