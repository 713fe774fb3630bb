//! The merged report on synthetic per-rank traces with a planted slow rank.

use serde_json::{json, Value};
use steptrace::analysis::{RankReport, Report, ReportOptions};
use steptrace::reader::{parse_trace, Trace};

/// One rank's trace: `steps` steps of `base_ms` work (plus `extra_ms` for
/// this rank), then, when `synced`, an all-reduce that waits for the
/// slowest rank (`slowest_ms` of work), so every rank's step lasts alike.
struct Plan {
    world: u32,
    steps: u64,
    base_ms: f64,
    slow_rank: Option<u32>,
    extra_ms: f64,
    synced: bool,
    torch_shaped: bool,
}

impl Plan {
    fn work(&self, rank: u32, step: u64) -> f64 {
        // A little jitter that no rank keeps: the planted rank must win on
        // its extra work, not on noise.
        let jitter = ((rank as u64 * 7 + step * 13) % 5) as f64 * 0.01;
        self.base_ms + jitter + if Some(rank) == self.slow_rank { self.extra_ms } else { 0.0 }
    }

    fn trace(&self, rank: u32) -> Trace {
        parse_trace(self.doc(rank).to_string().as_bytes()).unwrap()
    }

    fn doc(&self, rank: u32) -> Value {
        let exchange = 0.3;
        let mut events =
            vec![json!({"ph":"M","pid":1,"tid":1,"name":"thread_name","args":{"name":format!("rank-{rank}")}})];
        let mut t = 1000.0;
        for step in 0..self.steps {
            let work = self.work(rank, step);
            let slowest = (0..self.world).map(|r| self.work(r, step)).fold(0.0, f64::max);
            let step_ms = if self.synced { slowest + exchange } else { work };
            let us = |ms: f64| ms * 1000.0;
            events.push(json!({"ph":"X","name":format!("ProfilerStep#{step}"),"pid":1,"tid":1,"ts":t,"dur":us(step_ms),"cat":"steptrace"}));
            events.push(
                json!({"ph":"X","name":"forward","pid":1,"tid":1,"ts":t + 1.0,"dur":us(work) - 2.0,"cat":"steptrace"}),
            );
            if self.synced {
                let name = if self.torch_shaped { "nccl:all_reduce" } else { "collective.all_reduce" };
                events.push(json!({"ph":"X","name":name,"pid":1,"tid":1,"ts":t + us(work),"dur":us(step_ms - work),"cat":"steptrace"}));
            }
            t += us(step_ms) + 5.0;
        }
        if self.torch_shaped {
            json!({"distributedInfo": {"backend": "nccl", "rank": rank, "world_size": self.world}, "traceEvents": events})
        } else {
            json!({"distributedInfo": {"backend": "threads", "rank": rank, "world_size": self.world}, "traceEvents": events,
                   "metadata": {"format": "steptrace-chrome-trace/1", "worker": "ddp", "clock": {"ts_unit": "us", "epoch_unix_ms": 7},
                                "distributed": {"backend": "threads", "rank": rank, "world_size": self.world},
                                "manifest": {"model": "convnet", "startup_steps": 1}}})
        }
    }

    fn files(&self) -> Vec<(String, Trace)> {
        (0..self.world).map(|r| (format!("rank{r}.trace.json"), self.trace(r))).collect()
    }

    fn report(&self) -> RankReport {
        let files = self.files();
        assert!(RankReport::applies(&files));
        RankReport::build(&files, &ReportOptions::default()).unwrap()
    }
}

fn plan() -> Plan {
    Plan { world: 4, steps: 12, base_ms: 10.0, slow_rank: Some(2), extra_ms: 3.0, synced: true, torch_shaped: false }
}

#[test]
fn a_planted_slow_rank_is_named_with_its_lag_in_synchronised_steps() {
    let report = plan().report();
    assert_eq!(report.world_size, 4);
    assert!(report.collective_not_observed.is_none());
    let s = report.straggler.as_ref().expect("a straggler");
    assert_eq!(s.rank, 2);
    assert_eq!((s.slowest_steps, s.steps), (11, 11), "step 0 is startup");
    assert!((s.lag_ms.median - 3.0).abs() < 0.05, "lag {:?}", s.lag_ms);
    // Every rank's step time is alike: only the work tells.
    let steps: Vec<f64> = report.ranks.iter().map(|r| r.step_ms.as_ref().unwrap().median).collect();
    assert!(steps.iter().all(|m| (m - steps[0]).abs() < 0.05), "{steps:?}");
    // The fast ranks wait about the lag in the collective.
    let wait = s.others_wait_ms.as_ref().unwrap().median;
    assert!((wait - 3.3).abs() < 0.1, "{wait}");
    for step in &report.steps {
        assert_eq!(step.slowest, 2, "step {}", step.step);
        assert!((step.lag_ms - 3.0).abs() < 0.06);
    }
    let h = report.hypotheses.iter().find(|h| h.id == "straggler").expect("hypothesis");
    assert!(h.evidence.contains("rank 2 was the slowest in 11 of 11 steps"), "{}", h.evidence);
    assert!(h.next.contains("swapped"), "{}", h.next);
    assert_eq!(report.reports.len(), 4);
}

#[test]
fn unsynchronised_ranks_are_compared_by_step_time_and_collectives_are_not_observed() {
    let report = Plan { synced: false, slow_rank: Some(0), extra_ms: 2.0, world: 2, ..plan() }.report();
    let s = report.straggler.as_ref().unwrap();
    assert_eq!(s.rank, 0);
    assert!((s.lag_ms.median - 2.0).abs() < 0.05, "{:?}", s.lag_ms);
    assert!(s.others_wait_ms.is_none());
    assert!(report.collective_not_observed.as_ref().unwrap().contains("not observed"));
    assert!(report.ranks.iter().all(|r| r.collective_ms.is_none()), "not observed, never zero");
}

#[test]
fn torch_distributed_traces_read_the_same() {
    let report = Plan { torch_shaped: true, slow_rank: Some(3), ..plan() }.report();
    assert_eq!(report.backend.as_deref(), Some("nccl"));
    let s = report.straggler.as_ref().unwrap();
    assert_eq!(s.rank, 3);
    // torch files declare no startup: only step 0 is startup there.
    assert!((s.lag_ms.median - 3.0).abs() < 0.05);
}

#[test]
fn equal_ranks_have_no_straggler_and_a_small_lag_is_not_one() {
    let report = Plan { slow_rank: None, ..plan() }.report();
    assert!(report.straggler.is_none());
    assert!(report.notes.iter().any(|n| n.starts_with("no straggler")), "{:?}", report.notes);
    // 2% of a step: below the 5% line.
    let report = Plan { extra_ms: 0.2, ..plan() }.report();
    assert!(report.straggler.is_none(), "{:?}", report.straggler);
}

#[test]
fn identical_ranks_tie_and_none_is_the_slowest() {
    // Every rank's file the same but for its rank.
    let plan = Plan { slow_rank: None, ..plan() };
    let files: Vec<(String, Trace)> = (0..plan.world)
        .map(|rank| {
            let mut doc = plan.doc(0);
            doc["distributedInfo"]["rank"] = json!(rank);
            doc["metadata"]["distributed"]["rank"] = json!(rank);
            (format!("rank{rank}.trace.json"), parse_trace(doc.to_string().as_bytes()).unwrap())
        })
        .collect();
    let report = RankReport::build(&files, &ReportOptions::default()).unwrap();
    assert_eq!(report.steps.len(), 11);
    assert!(report.steps.iter().all(|s| s.tied && s.slowest == 0 && s.lag_ms == 0.0), "{:?}", report.steps);
    assert!(report.ranks.iter().all(|r| r.slowest_steps == 0), "a tie counts for no rank");
    assert!(report.straggler.is_none());
    // Ranks that differ are not tied.
    let report = plan.report();
    assert!(report.steps.iter().all(|s| !s.tied), "{:?}", report.steps);
    assert_eq!(report.ranks.iter().map(|r| r.slowest_steps).sum::<usize>(), report.steps.len());
}

#[test]
fn steps_not_every_rank_recorded_are_left_out_with_one_warning() {
    // Rank 3 stopped two steps early: the other three ranks lose steps 10 and 11, said once for all three.
    let mut files = plan().files();
    let short = Plan { steps: 10, ..plan() };
    files[3] = ("rank3.trace.json".into(), short.trace(3));
    let report = RankReport::build(&files, &ReportOptions::default()).unwrap();
    let left_out: Vec<&String> = report.warnings.iter().filter(|w| w.contains("left out of the comparison")).collect();
    assert_eq!(
        left_out,
        ["ranks 0–2 recorded 2 step(s) that not every rank recorded (#10, #11): left out of the comparison"],
        "{:?}",
        report.warnings
    );
    assert_eq!(report.steps.iter().map(|s| s.step).collect::<Vec<_>>(), (1..10).collect::<Vec<_>>());
    assert_eq!(report.straggler.as_ref().map(|s| s.rank), Some(2));
}

#[test]
fn a_missing_rank_is_said_and_a_file_without_rank_is_refused() {
    let mut files = plan().files();
    files.remove(1);
    let report = RankReport::build(&files, &ReportOptions::default()).unwrap();
    assert!(report.warnings.iter().any(|w| w.contains("rank(s) [1] of 4")), "{:?}", report.warnings);
    assert_eq!(report.straggler.as_ref().map(|s| s.rank), Some(2));

    let mut doc: Value =
        serde_json::from_str(r#"{"traceEvents":[{"ph":"X","name":"ProfilerStep#1","ts":0,"dur":5,"pid":1,"tid":1}]}"#)
            .unwrap();
    doc["x"] = json!(1);
    files.push(("plain.json".into(), parse_trace(doc.to_string().as_bytes()).unwrap()));
    let err = RankReport::build(&files, &ReportOptions::default()).unwrap_err();
    assert!(err.to_string().contains("plain.json says no rank"), "{err}");
    // One rank alone is not a comparison: the single-run report applies.
    let one = vec![plan().files().remove(0)];
    assert!(!RankReport::applies(&one));
    assert!(Report::build(&one, &ReportOptions::default()).is_ok());
}
