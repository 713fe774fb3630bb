//! What the [`Profiled`](steptrace_burn::learner::Profiled) optimizer adds
//! to an update outside the recorded window, measured paired in one
//! process: rounds alternate between the bare optimizer (burn's
//! `ModuleOptimizer` over SGD) and the wrapped one (the same over
//! `Profiled<Sgd>`) on the same model, and only the `step` call is timed.
//!
//! ```sh
//! cargo run --release -p steptrace-burn --example learner_overhead -- 20 500
//! ```
//!
//! Arguments: rounds, and updates per round and variant. Prints each
//! round's median update time for both, then the median and range of the
//! per-round differences.

use std::time::Instant;

use burn::module::Module;
use burn::nn::{Linear, LinearConfig};
use burn::optim::{GradientsParams, ModuleOptimizer, SgdConfig};
use burn::prelude::*;
use steptrace_burn::learner::LearnerProfiler;

#[derive(Module, Debug)]
struct Tiny {
    linear: Linear,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Times `n` updates of `optim` on `model`; returns the model and the times (ns).
fn updates(mut model: Tiny, optim: &mut ModuleOptimizer, x: &Tensor<2>, n: usize) -> (Tiny, Vec<f64>) {
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let loss = model.linear.forward(x.clone()).powi_scalar(2).mean();
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        let t = Instant::now();
        model = optim.step(1e-3, model, grads);
        times.push(t.elapsed().as_nanos() as f64);
    }
    (model, times)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<usize> = std::env::args().skip(1).map(|a| a.parse()).collect::<Result<_, _>>()?;
    let (rounds, n) = (*args.first().unwrap_or(&20), *args.get(1).unwrap_or(&500));
    let dir = tempfile::tempdir()?;
    // A schedule that never reaches its window: every step is a wait step.
    let profiler = LearnerProfiler::install(
        steptrace::Profiler::builder(format!("skip_first={},active=1", u64::MAX / 2).parse()?).out_dir(dir.path()),
    )?;
    // The CPU backend (burn-flex), with autodiff.
    let device = Device::flex().autodiff();
    let x = Tensor::<2>::ones([64, 64], &device);
    let mut model = Tiny { linear: LinearConfig::new(64, 64).init(&device) };
    let mut bare = SgdConfig::new().init();
    let mut wrapped = profiler.optimizer(SgdConfig::new().build(), &model);
    let mut diffs = Vec::new();
    println!("round\tbare_median_ns\twrapped_median_ns");
    for round in 0..rounds {
        let (m, t_bare) = updates(model, &mut bare, &x, n);
        let (m, t_wrapped) = updates(m, &mut wrapped, &x, n);
        model = m;
        let (b, w) = (median(t_bare), median(t_wrapped));
        println!("{round}\t{b:.0}\t{w:.0}");
        diffs.push(w - b);
    }
    diffs.sort_by(f64::total_cmp);
    println!(
        "wrapped - bare, per update: median {:.0} ns, min {:.0}, max {:.0} ({} rounds of {} updates each)",
        median(diffs.clone()),
        diffs[0],
        diffs[diffs.len() - 1],
        rounds,
        n
    );
    println!("updates counted by the profiler: {}", profiler.updates());
    Ok(())
}
