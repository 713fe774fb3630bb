//! A fake workload under the global subscriber, for tests that need a
//! separate process (e.g. killing it mid-window).
//!
//! Usage: `fake_workload OUT_DIR SCHEDULE STEPS [HANG_AT_STEP]`
//! With HANG_AT_STEP, it prints "hanging" once that step has begun and
//! spins forever, for the caller to kill it.

use std::time::Duration;

use steptrace::{Profiler, Schedule};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        eprintln!("usage: fake_workload OUT_DIR SCHEDULE STEPS [HANG_AT_STEP]");
        std::process::exit(2);
    }
    let schedule: Schedule = match args[2].parse() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let steps: u64 = args[3].parse().unwrap_or(10);
    let hang: Option<u64> = args.get(4).and_then(|s| s.parse().ok());
    let mut profiler = match Profiler::builder(schedule).out_dir(&args[1]).worker("child").try_install() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    profiler.start();
    for step in 0..steps {
        steptrace_tests::one_step(Duration::from_micros(200));
        if hang == Some(step) {
            // Another step has begun and been flushed: say so and wait.
            profiler.step();
            steptrace_tests::one_step(Duration::from_micros(200));
            println!("hanging");
            loop {
                std::thread::sleep(Duration::from_secs(1));
            }
        }
        profiler.step();
    }
    match profiler.finish() {
        Ok(saved) => {
            for trace in saved {
                println!("{}", trace.path.display());
            }
        }
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
}
