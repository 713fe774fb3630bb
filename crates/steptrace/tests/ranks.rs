//! A run whose ranks are threads: one file per rank and cycle, in one
//! folder per cycle, each rank's spans in its own file only.

use std::path::{Path, PathBuf};
use std::sync::Barrier;
use std::time::Duration;

use serde_json::Value;
use steptrace::format::DistributedInfo;
use steptrace::reader::read_trace_file;
use steptrace::{ranks, Error, Profiler, SavedTrace};
use tracing::Dispatch;
use tracing_subscriber::prelude::*;

fn spin(d: Duration) {
    let t = std::time::Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// Runs `world` ranks for `steps` steps; each rank has a loader thread
/// that enters the rank, and an unranked thread also opens spans.
fn run(dir: &Path, schedule: &str, world: u32, steps: u64) -> (Vec<Vec<SavedTrace>>, u64) {
    let (layer, group) = Profiler::builder(schedule.parse().unwrap())
        .out_dir(dir)
        .worker("ddp")
        .rank_backend("test-threads")
        .build_ranks(world)
        .unwrap();
    let dispatch = Dispatch::new(tracing_subscriber::registry().with(layer));
    let barrier = Barrier::new(world as usize);
    let saved = std::thread::scope(|s| {
        let handles: Vec<_> = (0..world)
            .map(|rank| {
                let (dispatch, group, barrier) = (dispatch.clone(), &group, &barrier);
                std::thread::Builder::new()
                    .name(format!("rank-{rank}"))
                    .spawn_scoped(s, move || {
                        tracing::dispatcher::with_default(&dispatch, || {
                            let mut profiler = group.take(rank).unwrap();
                            profiler.start();
                            for _ in 0..steps {
                                std::thread::scope(|inner| {
                                    std::thread::Builder::new()
                                        .name(format!("loader-of-{rank}"))
                                        .spawn_scoped(inner, || {
                                            tracing::dispatcher::with_default(&dispatch, || {
                                                let _rank = ranks::enter(rank);
                                                let _load =
                                                    tracing::info_span!(target: "steptrace", "data.load").entered();
                                                spin(Duration::from_micros(100));
                                            })
                                        })
                                        .unwrap();
                                });
                                {
                                    let _fwd =
                                        tracing::info_span!(target: "steptrace", "forward", rank = rank).entered();
                                    spin(Duration::from_micros(200 * (1 + u64::from(rank))));
                                }
                                {
                                    let _ar =
                                        tracing::info_span!(target: "steptrace", "collective.all_reduce").entered();
                                    barrier.wait();
                                }
                                profiler.step();
                            }
                            profiler.finish().unwrap()
                        })
                    })
                    .unwrap()
            })
            .collect();
        // A thread of no rank: nothing of it is written.
        s.spawn(|| {
            tracing::dispatcher::with_default(&dispatch, || {
                for _ in 0..50 {
                    let _x = tracing::info_span!(target: "steptrace", "unranked").entered();
                    std::thread::sleep(Duration::from_micros(200));
                }
            })
        });
        handles.into_iter().map(|h| h.join().unwrap()).collect::<Vec<_>>()
    });
    (saved, group.unattributed())
}

fn names(path: &Path) -> Vec<String> {
    let trace = read_trace_file(path).unwrap();
    trace.events.iter().filter(|e| e.ph == "X" || e.ph == "B").map(|e| e.name.clone()).collect()
}

fn thread_names(path: &Path) -> Vec<String> {
    let doc: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    doc["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["name"] == "thread_name")
        .map(|e| e["args"]["name"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn each_rank_writes_its_own_file_per_cycle_in_the_cycles_folder() {
    let dir = tempfile::tempdir().unwrap();
    let (saved, unattributed) = run(dir.path(), "wait=1,warmup=1,active=2,repeat=2", 2, 9);
    assert!(unattributed > 0, "the unranked thread's spans are counted");
    for (rank, files) in saved.iter().enumerate() {
        assert_eq!(files.iter().map(|t| t.steps.clone()).collect::<Vec<_>>(), [vec![2, 3], vec![6, 7]], "rank {rank}");
        for t in files {
            let name = t.path.file_name().unwrap().to_str().unwrap();
            assert!(name.starts_with(&format!("ddp.rank{rank}-of-2.cycle{}.", t.cycle)), "{name}");
            let folder = t.path.parent().unwrap().file_name().unwrap().to_str().unwrap();
            assert!(folder.starts_with("ddp.") && folder.ends_with(&format!(".cycle{}", t.cycle)), "{folder}");
        }
    }
    // Both ranks' files of a cycle share its folder, and nothing else is in it.
    for (zero, one) in saved[0].iter().zip(&saved[1]) {
        let a: PathBuf = zero.path.parent().unwrap().into();
        assert_eq!(a, one.path.parent().unwrap());
        assert_eq!(std::fs::read_dir(&a).unwrap().count(), 2);
    }

    for (rank, files) in saved.iter().enumerate() {
        let text = std::fs::read_to_string(&files[0].path).unwrap();
        // HTA's rank pattern, first match, must find this rank.
        assert!(text.starts_with("{\"distributedInfo\": {"), "{}", &text[..80]);
        let at = text.find("\"rank\": ").unwrap();
        assert!(text[at + 8..].starts_with(&rank.to_string()));
        let doc: Value = serde_json::from_str(&text).unwrap();
        let info = DistributedInfo::from_top_level(doc.as_object().unwrap()).unwrap();
        assert_eq!((info.rank, info.world_size, info.backend.as_str()), (rank as u32, 2, "test-threads"));
        let trace = read_trace_file(&files[0].path).unwrap();
        let meta = trace.steptrace().unwrap().unwrap().metadata.unwrap();
        assert_eq!(meta.distributed.as_ref().map(|d| d.rank), Some(rank as u32));
        assert!(meta.clock.as_ref().unwrap().offset_us.unwrap() >= 0.0);

        // Only this rank's threads.
        let threads = thread_names(&files[0].path);
        assert!(threads.contains(&format!("rank-{rank}")), "{threads:?}");
        assert!(threads.contains(&format!("loader-of-{rank}")), "{threads:?}");
        let other = 1 - rank;
        assert!(!threads.iter().any(|t| t.ends_with(&other.to_string())), "{threads:?}");
        let spans = names(&files[0].path);
        assert!(spans.iter().any(|n| n == "data.load") && spans.iter().any(|n| n == "collective.all_reduce"));
        assert!(!spans.iter().any(|n| n == "unranked"), "a thread of no rank is not written");
        assert_eq!(spans.iter().filter(|n| n.starts_with("ProfilerStep#")).count(), 2);
    }
    // One run's clock: the ranks' files share the epoch.
    let epoch = |p: &Path| read_trace_file(p).unwrap().steptrace().unwrap().unwrap().epoch_unix_ms();
    assert_eq!(epoch(&saved[0][0].path), epoch(&saved[1][1].path));
}

#[test]
fn bad_rank_requests_are_refused_with_reasons() {
    let dir = tempfile::tempdir().unwrap();
    let builder = || Profiler::builder("active=1".parse().unwrap()).out_dir(dir.path());
    let err = builder().build_ranks::<tracing_subscriber::Registry>(0).unwrap_err();
    assert!(matches!(err, Error::Rank { .. }) && err.to_string().contains("1 to"), "{err}");
    let err =
        builder().file_name("{worker}.cycle{cycle}.json").build_ranks::<tracing_subscriber::Registry>(2).unwrap_err();
    assert!(err.to_string().contains("{rank}"), "{err}");
    let (_layer, group) = builder().build_ranks::<tracing_subscriber::Registry>(2).unwrap();
    let err = group.take(2).unwrap_err();
    let err2 = builder().rank_device_collectors(vec![]).build_ranks::<tracing_subscriber::Registry>(5000).unwrap_err();
    assert!(err2.to_string().contains("1 to 4096"), "{err2}");
    assert!(err.to_string().contains("rank 2 of 2: there is no such rank"), "{err}");
    let first = group.take(1).unwrap();
    let err = group.take(1).unwrap_err();
    assert!(err.to_string().contains("taken already"), "{err}");
    drop(first);
    assert_eq!(group.untaken(), vec![0]);
    assert!(ranks::current() == Some(1), "this thread took rank 1");
    {
        let _scope = ranks::enter(0);
        assert_eq!(ranks::current(), Some(0));
    }
    assert_eq!(ranks::current(), Some(1));
}

/// A collector that records nothing.
struct Nothing;

impl steptrace::device::DeviceCollector for Nothing {
    fn open(&mut self) -> Result<(), steptrace::device::DeviceError> {
        Ok(())
    }
    fn close(
        &mut self,
        _origin: std::time::Instant,
    ) -> Result<steptrace::device::DeviceWindow, steptrace::device::DeviceError> {
        Ok(steptrace::device::DeviceWindow::default())
    }
}

#[test]
fn one_collector_for_several_ranks_is_said_in_every_file_not_shared() {
    let dir = tempfile::tempdir().unwrap();
    let (layer, group) = Profiler::builder("active=2,repeat=1".parse().unwrap())
        .out_dir(dir.path())
        .device_collector(Box::new(Nothing))
        .build_ranks(2)
        .unwrap();
    let dispatch = Dispatch::new(tracing_subscriber::registry().with(layer));
    let saved: Vec<SavedTrace> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..2)
            .map(|rank| {
                let (dispatch, group) = (&dispatch, &group);
                s.spawn(move || {
                    tracing::dispatcher::with_default(dispatch, || {
                        let mut p = group.take(rank).unwrap();
                        p.start();
                        p.step();
                        p.step();
                        p.finish().unwrap()
                    })
                })
            })
            .collect();
        hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(saved.len(), 2);
    for t in &saved {
        let trace = read_trace_file(&t.path).unwrap();
        let activity = &trace.metadata["metadata"]["device_activity"];
        assert_eq!(activity["status"], "not_observed", "{activity}");
        assert!(activity["reason"].as_str().unwrap().contains("each rank needs its own"), "{activity}");
    }
}

#[test]
fn the_building_thread_can_be_rank_0() {
    let dir = tempfile::tempdir().unwrap();
    let (layer, group) =
        Profiler::builder("active=2,repeat=1".parse().unwrap()).out_dir(dir.path()).build_ranks(2).unwrap();
    let dispatch = Dispatch::new(tracing_subscriber::registry().with(layer));
    let step = |group: &steptrace::RankProfilers, rank: u32| {
        let mut p = group.take(rank).unwrap();
        p.start();
        for _ in 0..2 {
            let _f = tracing::info_span!(target: "steptrace", "forward").entered();
            drop(_f);
            p.step();
        }
        p.finish().unwrap()
    };
    let (mine, other) = std::thread::scope(|s| {
        let other = s.spawn(|| tracing::dispatcher::with_default(&dispatch, || step(&group, 1)));
        let mine = tracing::dispatcher::with_default(&dispatch, || step(&group, 0));
        (mine, other.join().unwrap())
    });
    for saved in [&mine[0], &other[0]] {
        let trace = read_trace_file(&saved.path).unwrap();
        let meta = trace.steptrace().unwrap().unwrap().metadata.unwrap();
        assert_eq!(meta.lost_events_other_sink, 0, "{}", saved.path.display());
        assert_eq!(names(&saved.path).iter().filter(|n| *n == "forward").count(), 2, "{}", saved.path.display());
    }
}
