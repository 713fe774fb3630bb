//! The burn-train integration with one profiler per rank, on the CPU:
//! burn's `DistributedDataParallel` needs a backend with collective
//! operations (CUDA; burn-flex has none), so each rank's loop is run here
//! as DDP runs it, on a thread of its own with its own clone of the
//! optimizer, through the same wrappers.
//!
//! One global subscriber per process: this binary holds one run.

use burn::module::Module;
use burn::nn::loss::CrossEntropyLossConfig;
use burn::nn::{Linear, LinearConfig};
use burn::optim::{GradientsParams, SgdConfig};
use burn::prelude::*;
use steptrace::analysis::{RankReport, ReportOptions};
use steptrace::format::DistributedInfo;
use steptrace::reader::read_trace_file;
use steptrace_burn::learner::LearnerProfiler;

#[derive(Module, Debug)]
struct Model {
    linear: Linear,
}

#[test]
fn each_rank_thread_writes_its_own_files_and_the_ranks_compare() {
    let dir = tempfile::tempdir().unwrap();
    // The CPU backend (burn-flex) has one device: listed twice, each rank
    // takes the first free one at its first update.
    let device = Device::flex().autodiff();
    let devices = vec![device.clone(), device.clone()];
    let profiler = LearnerProfiler::install_ranks(
        steptrace::Profiler::builder("wait=1,warmup=1,active=3,repeat=1".parse().unwrap())
            .out_dir(dir.path())
            .worker("ddp-cpu")
            .manifest("model", "linear"),
        devices,
    )
    .unwrap();
    // The model every rank trains (each rank builds its own copy).
    let model = |device: &Device| Model { linear: LinearConfig::new(8, 2).init(device) };
    let optimizer = profiler.optimizer(SgdConfig::new().build(), &model(&device));
    let updates = 7;
    std::thread::scope(|s| {
        let mut ranks = Vec::new();
        for rank in 0..2u64 {
            let (mut optimizer, device) = (optimizer.clone(), device.clone());
            let handle = std::thread::Builder::new()
                .name(format!("ddp-rank-{rank}"))
                .spawn_scoped(s, move || {
                    let mut model = model(&device);
                    for step in 0..updates {
                        let x = Tensor::<2>::ones([16, 8], &device) * ((step + rank) as f32);
                        let y = Tensor::<1, Int>::zeros([16], &device);
                        let loss = CrossEntropyLossConfig::new().init(&device).forward(model.linear.forward(x), y);
                        let grads = GradientsParams::from_grads(loss.backward(), &model);
                        // Rank 1 is planted slow: it works 3 ms more per update.
                        if rank == 1 {
                            let t = std::time::Instant::now();
                            while t.elapsed() < std::time::Duration::from_millis(3) {}
                        }
                        model = optimizer.step(0.1, model, grads);
                    }
                })
                .unwrap();
            ranks.push(handle);
        }
        // As burn-train joins its DDP workers: a joined thread has handed its rank's files
        // back (the scope's own end does not wait for that).
        for handle in ranks {
            handle.join().unwrap();
        }
    });
    let run = profiler.finish().unwrap();
    assert_eq!(run.world_size, Some(2));
    assert!(run.running_ranks.is_empty());
    assert_eq!(run.updates, 2 * updates);
    assert_eq!(run.missed_updates, 0);
    assert_eq!(run.saved.len(), 2, "one file per rank: {:?}", run.saved);
    let mut files = Vec::new();
    // Each rank thread takes the first free rank at its first update, so thread k need not
    // be rank k: which rank the planted slow thread got is read from the files.
    let mut slow_rank = None;
    for (rank, saved) in run.saved.iter().enumerate() {
        assert_eq!(saved.steps, vec![2, 3, 4]);
        let name = saved.path.file_name().unwrap().to_str().unwrap();
        assert!(name.starts_with(&format!("ddp-cpu.rank{rank}-of-2.cycle0.")), "{name}");
        let trace = read_trace_file(&saved.path).unwrap();
        let info = DistributedInfo::from_top_level(&trace.metadata).unwrap();
        assert_eq!((info.rank, info.world_size), (rank as u32, 2));
        let threads = steptrace_tests::thread_names(&trace);
        let ranks: Vec<&str> = threads.iter().copied().filter(|t| t.starts_with("ddp-rank-")).collect();
        assert_eq!(ranks.len(), 1, "one rank thread per file: {threads:?}");
        if ranks[0] == "ddp-rank-1" {
            assert!(slow_rank.replace(rank as u32).is_none(), "the slow thread in two files");
        }
        let meta = trace.steptrace().unwrap().unwrap().metadata.unwrap();
        assert_eq!(meta.manifest.model.as_deref(), Some("linear"));
        assert!(meta.manifest.parameters.is_some(), "each rank's first update describes its files");
        files.push((saved.path.display().to_string(), trace));
    }
    // Unsynchronised here (no all-reduce): the ranks compare by step time.
    let report = RankReport::build(&files, &ReportOptions::default()).unwrap();
    let straggler = report.straggler.expect("a rank was planted slow");
    assert_eq!(Some(straggler.rank), slow_rank, "the straggler is the rank the slow thread took");
    assert!(straggler.lag_ms.median >= 2.0, "{:?}", straggler.lag_ms);
}
