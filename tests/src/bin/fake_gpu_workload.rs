//! Writes traces with CUPTI-shaped device records from the fake GPU, for
//! checks that need a real file without a GPU (the HTA check in CI).
//!
//! Usage: `fake_gpu_workload OUT_DIR [STEPS]`

use std::path::Path;

use steptrace_tests::fake_gpu::FakeGpu;
use steptrace_tests::Workload;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(out) = args.get(1) else {
        eprintln!("usage: fake_gpu_workload OUT_DIR [STEPS]");
        std::process::exit(2);
    };
    let steps: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(8);
    let mut w = Workload::new("wait=1,warmup=1,active=4,repeat=1", steps, Path::new(out));
    w.device = Some(Ok(FakeGpu::default()));
    match w.run() {
        Ok(saved) => saved.iter().for_each(|t| println!("{}", t.path.display())),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
}
