//! Writes the traces of a fake run of several ranks (threads as ranks,
//! fake GPUs, a real all-reduce barrier), for checks that need per-rank
//! files without several GPUs: HTA in CI, the book's multi-rank chapter.
//!
//! Usage: `fake_ranks_workload OUT_DIR [WORLD] [STEPS] [SLOW_RANK EXTRA_MS]`

use std::path::Path;
use std::time::Duration;

use steptrace_tests::ranks::RankWorkload;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = || -> ! {
        eprintln!("usage: fake_ranks_workload OUT_DIR [WORLD] [STEPS] [SLOW_RANK EXTRA_MS]");
        std::process::exit(2)
    };
    let Some(out) = args.get(1) else { usage() };
    let number = |i: usize, default: u64| match args.get(i) {
        None => default,
        Some(v) => v.parse().unwrap_or_else(|_| usage()),
    };
    let world = u32::try_from(number(2, 2)).unwrap_or_else(|_| usage());
    let mut w = RankWorkload::new("wait=1,warmup=1,active=4,repeat=1", number(3, 8), world, Path::new(out));
    if args.len() > 4 {
        let rank = u32::try_from(number(4, 0)).unwrap_or_else(|_| usage());
        let extra: f64 = args
            .get(5)
            .and_then(|v| v.parse().ok())
            .filter(|v: &f64| v.is_finite() && *v >= 0.0)
            .unwrap_or_else(|| usage());
        w.slow = Some((rank, Duration::from_secs_f64(extra / 1000.0)));
    }
    match w.run() {
        Ok(ranks) => ranks.iter().flatten().for_each(|t| println!("{}", t.path.display())),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
}
