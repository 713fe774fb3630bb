//! A fake run of several ranks, threads as ranks through the core API
//! (no burn): each rank reads its batch on a loader thread of its own,
//! works, then meets the others in an all-reduce (a real barrier), as a
//! data-parallel step does. One rank can be planted slow.

use std::path::{Path, PathBuf};
use std::sync::Barrier;
use std::time::Duration;

use steptrace::format::names::{ALL_REDUCE, DATA_LOAD, DATA_WAIT, TARGET};
use steptrace::{ranks, Profiler, SavedTrace, Schedule};
use tracing::Dispatch;
use tracing_subscriber::prelude::*;

use crate::fake_gpu::FakeGpu;
use crate::{busy, one_step};

/// See the [module docs](self).
#[derive(Clone, Debug)]
pub struct RankWorkload {
    /// Schedule string.
    pub schedule: String,
    /// `step()` calls per rank.
    pub steps: u64,
    /// Ranks.
    pub world: u32,
    /// Work per phase (forward, loss, backward, optimizer).
    pub phase: Duration,
    /// The planted slow rank, and its extra work per step.
    pub slow: Option<(u32, Duration)>,
    /// A fake GPU per rank (device = rank); the slow rank's kernels last
    /// twice as long.
    pub devices: bool,
    /// Output directory.
    pub out: PathBuf,
}

impl RankWorkload {
    /// `world` ranks writing into `out`.
    pub fn new(schedule: &str, steps: u64, world: u32, out: &Path) -> RankWorkload {
        RankWorkload {
            schedule: schedule.to_owned(),
            steps,
            world,
            phase: Duration::from_micros(300),
            slow: None,
            devices: true,
            out: out.to_owned(),
        }
    }

    /// Runs every rank on its own thread under a scoped subscriber; returns
    /// each rank's saved traces, in rank order.
    pub fn run(&self) -> Result<Vec<Vec<SavedTrace>>, steptrace::Error> {
        let schedule: Schedule = self.schedule.parse()?;
        let mut builder = Profiler::builder(schedule)
            .out_dir(&self.out)
            .worker("fake-ddp")
            .rank_backend("threads (fake all-reduce)")
            .manifest("workload", "fake ranks");
        if self.devices {
            let gpus = (0..self.world)
                .map(|rank| {
                    let mut gpu = FakeGpu::default();
                    gpu.device = rank;
                    if self.slow.is_some_and(|(r, _)| r == rank) {
                        gpu.kernel *= 2;
                    }
                    Box::new(gpu) as Box<dyn steptrace::device::DeviceCollector>
                })
                .collect();
            builder = builder.rank_device_collectors(gpus);
        }
        let (layer, group) = builder.build_ranks(self.world)?;
        let dispatch = Dispatch::new(tracing_subscriber::registry().with(layer));
        let all_reduce = Barrier::new(self.world as usize);
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..self.world)
                .map(|rank| {
                    let (dispatch, group, all_reduce) = (&dispatch, &group, &all_reduce);
                    let extra = self.slow.filter(|(r, _)| *r == rank).map_or(Duration::ZERO, |(_, d)| d);
                    std::thread::Builder::new()
                        .name(format!("rank-{rank}"))
                        .spawn_scoped(s, move || {
                            tracing::dispatcher::with_default(dispatch, || {
                                self.rank(group, rank, extra, all_reduce, dispatch)
                            })
                        })
                        .expect("spawn a rank")
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err(steptrace::Error::Install("a rank panicked".into()))))
                .collect()
        })
    }

    fn rank(
        &self,
        group: &steptrace::RankProfilers,
        rank: u32,
        extra: Duration,
        all_reduce: &Barrier,
        dispatch: &Dispatch,
    ) -> Result<Vec<SavedTrace>, steptrace::Error> {
        let mut profiler = group.take(rank)?;
        let (ask, asked) = std::sync::mpsc::channel::<()>();
        let (give, given) = std::sync::mpsc::channel::<()>();
        std::thread::scope(|s| {
            // The rank's loader: one batch per request, read while the step thread waits.
            std::thread::Builder::new()
                .name(format!("loader-{rank}"))
                .spawn_scoped(s, move || {
                    tracing::dispatcher::with_default(dispatch, || {
                        let _rank = ranks::enter(rank);
                        while asked.recv().is_ok() {
                            {
                                let _load = tracing::info_span!(target: TARGET, DATA_LOAD).entered();
                                busy(self.phase / 2);
                            }
                            if give.send(()).is_err() {
                                break;
                            }
                        }
                    })
                })
                .expect("spawn a loader");
            profiler.start();
            for _ in 0..self.steps {
                if ask.send(()).is_ok() {
                    let _wait = tracing::info_span!(target: TARGET, DATA_WAIT).entered();
                    let _ = given.recv();
                }
                one_step(self.phase);
                busy(extra);
                {
                    let _collective = tracing::info_span!(target: TARGET, ALL_REDUCE).entered();
                    all_reduce.wait();
                    busy(Duration::from_micros(50));
                }
                profiler.step();
            }
            drop(ask);
        });
        profiler.finish()
    }
}
