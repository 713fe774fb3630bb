//! `steptrace report` on a run of several ranks, laid out as steptrace
//! writes one: a folder per cycle, a file per rank, each headed by its
//! `distributedInfo`.

mod common;

use std::path::Path;

use common::{flat, steptrace, text};
use serde_json::{json, Value};

/// Writes cycle `cycle` of a `world`-rank run whose rank `slow` works
/// `extra_ms` more per step, all ranks meeting in an all-reduce.
fn write_cycle(dir: &Path, world: u32, cycle: u64, slow: u32, extra_ms: f64) {
    let folder = dir.join(format!("ddp.20261201T120000.000Z.cycle{cycle}"));
    std::fs::create_dir_all(&folder).unwrap();
    for rank in 0..world {
        let mut events = Vec::new();
        let mut t = 100.0;
        for step in (cycle * 10)..(cycle * 10 + 6) {
            let work = 8.0 + if rank == slow { extra_ms } else { 0.0 };
            let step_ms = 8.0 + extra_ms + 0.5;
            events.push(json!({"ph":"X","name":format!("ProfilerStep#{step}"),"pid":1,"tid":3,"ts":t,"dur":step_ms * 1000.0}));
            events.push(json!({"ph":"X","name":"forward","pid":1,"tid":3,"ts":t + 1.0,"dur":work * 1000.0 - 2.0}));
            events.push(json!({"ph":"X","name":"collective.all_reduce","pid":1,"tid":3,"ts":t + work * 1000.0,"dur":(step_ms - work) * 1000.0}));
            t += step_ms * 1000.0 + 10.0;
        }
        let head = format!("{{\"distributedInfo\": {{\"backend\": \"threads\", \"rank\": {rank}, \"world_size\": {world}}},\n");
        let meta = json!({"format": "steptrace-chrome-trace/1", "worker": "ddp", "cycle": cycle,
                          "clock": {"ts_unit": "us", "epoch_unix_ms": 1_795_000_000_000u64},
                          "distributed": {"backend": "threads", "rank": rank, "world_size": world},
                          "manifest": {"model": "convnet", "startup_steps": 1}});
        let body = format!("{head}\"traceEvents\": {}, \"metadata\": {meta}}}", Value::from(events));
        let name = format!("ddp.rank{rank}-of-{world}.cycle{cycle}.20261201T120000.00{rank}Z.trace.json");
        std::fs::write(folder.join(name), body).unwrap();
    }
}

#[test]
fn a_run_folder_of_several_ranks_is_compared_and_the_straggler_named() {
    let dir = tempfile::tempdir().unwrap();
    write_cycle(&dir.path().join("traces"), 3, 0, 2, 4.0);
    write_cycle(&dir.path().join("traces"), 3, 1, 2, 4.0);
    let out = steptrace(&["report", "traces"], dir.path());
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    let flat = flat(&stdout);
    assert!(flat.contains("3 ranks of 3"), "{stdout}");
    assert!(flat.contains("[straggler] rank 2"), "{stdout}");
    assert!(flat.contains("rank 2 was the slowest in 11 of 11 steps"), "{stdout}");
    assert!(flat.contains("by 4.00 ms"), "{stdout}");
    assert!(stdout.lines().all(|l| l.chars().count() <= 100), "fits 100 columns:\n{stdout}");

    let out = steptrace(&["report", "traces", "--json"], dir.path());
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let json: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(json["straggler"]["rank"], 2);
    assert!((json["straggler"]["lag_ms"]["median"].as_f64().unwrap() - 4.0).abs() < 1e-6);
    assert_eq!(json["reports"].as_array().unwrap().len(), 3);
    assert_eq!(json["steps"].as_array().unwrap().len(), 11, "step 0 is startup");

    // One rank in full.
    let out = steptrace(&["report", "traces", "--rank", "1"], dir.path());
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("steptrace report: 2 file(s)") && stdout.contains("== Spans"), "{stdout}");
}

#[test]
fn several_ranks_refuse_what_draws_one_and_a_missing_rank_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    write_cycle(&dir.path().join("traces"), 2, 0, 1, 2.0);
    for args in [&["report", "traces", "--plot", "s.svg"][..], &["report", "traces", "--html", "p.html"]] {
        let out = steptrace(args, dir.path());
        let (_, stderr) = text(&out);
        assert!(!out.status.success());
        assert!(flat(&stderr).contains("choose it with --rank N"), "{stderr}");
    }
    assert!(!dir.path().join("s.svg").exists() && !dir.path().join("p.html").exists());
    let out = steptrace(&["report", "traces", "--rank", "1", "--plot", "s.svg"], dir.path());
    assert!(out.status.success(), "{}", text(&out).1);
    assert!(dir.path().join("s.svg").exists());
    let out = steptrace(&["report", "traces", "--rank", "7"], dir.path());
    let (_, stderr) = text(&out);
    assert!(!out.status.success() && stderr.contains("no trace of rank 7"), "{stderr}");
}
