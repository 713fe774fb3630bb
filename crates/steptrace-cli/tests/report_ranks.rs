//! `steptrace report` on a run of several ranks, laid out as steptrace
//! writes one: a folder per cycle, a file per rank, each headed by its
//! `distributedInfo`.

mod common;

use std::path::Path;

use common::{flat, steptrace, text};
use serde_json::{json, Value};

/// The run's clock start, as every rank's file of one run says it.
const EPOCH: u64 = 1_795_000_000_000;

/// One rank's file: steps `steps`, each `work_ms` of work then an
/// all-reduce to the end of the step (`step_ms` on every rank), headed by
/// its `distributedInfo` and ending with steptrace's metadata (clock start
/// `epoch`).
fn rank_file(world: u32, rank: u32, cycle: u64, steps: std::ops::Range<u64>, work_ms: f64, epoch: u64) -> String {
    rank_steps(world, rank, cycle, steps, (work_ms, 12.5), epoch)
}

fn rank_steps(
    world: u32,
    rank: u32,
    cycle: u64,
    steps: std::ops::Range<u64>,
    (work_ms, step_ms): (f64, f64),
    epoch: u64,
) -> String {
    let mut events = Vec::new();
    let mut t = 100.0;
    for step in steps {
        events.push(
            json!({"ph":"X","name":format!("ProfilerStep#{step}"),"pid":1,"tid":3,"ts":t,"dur":step_ms * 1000.0}),
        );
        events.push(json!({"ph":"X","name":"forward","pid":1,"tid":3,"ts":t + 1.0,"dur":work_ms * 1000.0 - 2.0}));
        events.push(json!({"ph":"X","name":"collective.all_reduce","pid":1,"tid":3,"ts":t + work_ms * 1000.0,"dur":(step_ms - work_ms) * 1000.0}));
        t += step_ms * 1000.0 + 10.0;
    }
    let head =
        format!("{{\"distributedInfo\": {{\"backend\": \"threads\", \"rank\": {rank}, \"world_size\": {world}}},\n");
    let meta = json!({"format": "steptrace-chrome-trace/1", "worker": "ddp", "cycle": cycle,
                      "clock": {"ts_unit": "us", "epoch_unix_ms": epoch},
                      "distributed": {"backend": "threads", "rank": rank, "world_size": world},
                      "manifest": {"model": "convnet", "startup_steps": 1}});
    format!("{head}\"traceEvents\": {}, \"metadata\": {meta}}}", Value::from(events))
}

/// Writes cycle `cycle` of a `world`-rank run whose rank `slow` works
/// `extra_ms` more per step, all ranks meeting in an all-reduce.
fn write_cycle(dir: &Path, world: u32, cycle: u64, slow: u32, extra_ms: f64) {
    let folder = dir.join(format!("ddp.20261201T120000.000Z.cycle{cycle}"));
    std::fs::create_dir_all(&folder).unwrap();
    for rank in 0..world {
        let work = 8.0 + if rank == slow { extra_ms } else { 0.0 };
        let body = rank_steps(world, rank, cycle, (cycle * 10)..(cycle * 10 + 6), (work, 8.0 + extra_ms + 0.5), EPOCH);
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

/// Runs `args` in a new folder holding `files`: the exit code and all it printed.
fn run_on(files: &[(&str, String)], args: &[&str]) -> (Option<i32>, String, String) {
    let dir = tempfile::tempdir().unwrap();
    for (name, body) in files {
        std::fs::write(dir.path().join(name), body).unwrap();
    }
    let out = steptrace(args, dir.path());
    let (stdout, stderr) = text(&out);
    assert!(!stderr.contains("panicked"), "{stderr}");
    (out.status.code(), stdout, stderr)
}

#[test]
fn impossible_or_inconsistent_ranks_are_refused_naming_the_file() {
    let ok0 = || ("r0.json", rank_file(2, 0, 0, 0..6, 8.0, EPOCH));
    // Each case: what it is, its rank files (name, contents), the error it must give.
    type Case<'a> = (&'a str, Vec<(&'a str, String)>, &'a str);
    let cases: Vec<Case<'_>> = vec![
        (
            "a rank beyond the world size",
            vec![ok0(), ("r5.json", rank_file(2, 5, 0, 0..6, 8.0, EPOCH))],
            "r5.json: it says rank 5 of 2",
        ),
        (
            "a world size of 0",
            vec![("w0.json", rank_file(0, 0, 0, 0..6, 8.0, EPOCH))],
            "w0.json: it says rank 0 of world size 0",
        ),
        (
            "one rank twice in a cycle",
            vec![
                ok0(),
                ("a.json", rank_file(2, 1, 0, 0..6, 8.0, EPOCH)),
                ("b.json", rank_file(2, 1, 0, 0..6, 9.0, EPOCH)),
            ],
            "b.json: it says rank 1, cycle 0, as a.json does",
        ),
        (
            "ranks of two runs",
            vec![ok0(), ("other.json", rank_file(2, 1, 0, 0..6, 8.0, EPOCH + 60_000))],
            "other.json does not come from the same run as r0.json",
        ),
        (
            "world sizes that disagree",
            vec![ok0(), ("w3.json", rank_file(3, 1, 0, 0..6, 8.0, EPOCH))],
            "w3.json: it says world size 3, r0.json says 2",
        ),
        (
            "distributedInfo against metadata.distributed",
            vec![ok0(), ("m.json", rank_file(2, 1, 0, 0..6, 8.0, EPOCH).replacen("\"rank\": 1", "\"rank\": 0", 1))],
            "m.json: its distributedInfo says rank 0 of 2, its metadata.distributed rank 1 of 2",
        ),
    ];
    for (what, files, says) in &cases {
        let names: Vec<&str> = files.iter().map(|(n, _)| *n).collect();
        for extra in [&[][..], &["--json"], &["--rank", "0"]] {
            let args = [&["report"][..], &names, extra].concat();
            let (code, stdout, stderr) = run_on(files, &args);
            assert_eq!(code, Some(1), "{what} {args:?}: {stdout}{stderr}");
            assert!(flat(&stderr).contains(says), "{what} {args:?}: {stderr}");
            assert!(stdout.is_empty(), "{what}: nothing is reported: {stdout}");
        }
    }
}

#[test]
fn a_rank_file_that_cannot_say_its_run_is_left_out_with_a_warning_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    write_cycle(&dir.path().join("traces"), 2, 0, 1, 2.0);
    // Rank 1's file cut short before its metadata (and its clock).
    let folder = dir.path().join("traces/ddp.20261201T120000.000Z.cycle0");
    let cut = folder.join("ddp.rank1-of-2.cycle0.20261201T120000.001Z.trace.json");
    let body = std::fs::read_to_string(&cut).unwrap();
    std::fs::write(&cut, &body[..body.find("\"metadata\"").unwrap() - 10]).unwrap();
    let left_out = "ddp.rank1-of-2.cycle0.20261201T120000.001Z.trace.json: left out: it holds no steptrace metadata";
    let missing = "no file of rank(s) [1] of 2 (the files hold rank(s) [0]): this is the report of rank 0 alone";

    let out = steptrace(&["report", "traces", "--html", "p.html"], dir.path());
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(!stderr.contains("2 runs"), "one run, not two: {stderr}");
    let flat_out = flat(&stdout);
    assert!(flat_out.contains(left_out) && flat_out.contains(missing), "{stdout}");
    let page = flat(&std::fs::read_to_string(dir.path().join("p.html")).unwrap());
    assert!(page.contains(left_out) && page.contains(missing), "the page says it too");

    let out = steptrace(&["report", "traces", "--json"], dir.path());
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let warnings: Vec<&str> = json["warnings"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert!(
        warnings.iter().any(|w| w.contains(left_out)) && warnings.iter().any(|w| w.starts_with(missing)),
        "{warnings:?}"
    );
}

#[test]
fn one_rank_of_several_is_reported_as_that_rank_alone() {
    let files = [("r1.json", rank_file(2, 1, 0, 0..6, 8.0, EPOCH))];
    let says =
        "no file of rank(s) [0] of 2 (the files hold rank(s) [1]): this is the report of rank 1 alone, not of the run";
    let (code, stdout, stderr) = run_on(&files, &["report", "r1.json"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(flat(&stdout).contains(says), "{stdout}");
    let (_, stdout, _) = run_on(&files, &["report", "r1.json", "--json"]);
    let json: Value = serde_json::from_str(&stdout).unwrap();
    assert!(json["warnings"].as_array().unwrap().iter().any(|w| w == says), "{stdout}");
    // Asked for by its number, the rank is reported without the warning.
    let (code, stdout, _) = run_on(&files, &["report", "r1.json", "--rank", "1"]);
    assert_eq!(code, Some(0));
    assert!(!stdout.contains("no file of rank"), "{stdout}");
}

#[test]
fn steps_left_out_of_the_comparison_and_each_ranks_warnings_are_said() {
    // Rank 1 recorded two steps fewer, and one of its events has a negative duration.
    let r1 = rank_file(2, 1, 0, 0..6, 8.0, EPOCH).replacen(
        "\"traceEvents\": [",
        "\"traceEvents\": [{\"ph\":\"X\",\"name\":\"odd\",\"pid\":1,\"tid\":3,\"ts\":150.0,\"dur\":-5.0},",
        1,
    );
    let files = [("r0.json", rank_file(2, 0, 0, 0..8, 8.0, EPOCH)), ("r1.json", r1)];
    let dropped = "rank 0 recorded 2 step(s) that not every rank recorded (#6, #7): left out of the comparison";
    let own = "rank 1: r1.json: 1 event(s) with a missing, negative or non-finite duration";
    let (code, stdout, stderr) = run_on(&files, &["report", "r0.json", "r1.json"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(flat(&stdout).contains(dropped) && flat(&stdout).contains(own), "{stdout}");
    let (_, stdout, _) = run_on(&files, &["report", "r0.json", "r1.json", "--json"]);
    let json: Value = serde_json::from_str(&stdout).unwrap();
    let warnings: Vec<&str> = json["warnings"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert!(warnings.contains(&dropped) && warnings.iter().any(|w| w.starts_with(own)), "{warnings:?}");
    assert_eq!(json["steps"].as_array().unwrap().len(), 5, "steps 1 to 5: step 0 is startup, 6 and 7 rank 0's alone");
}

#[test]
fn identical_ranks_tie_and_none_is_called_the_slowest() {
    let files = [("r0.json", rank_file(2, 0, 0, 0..8, 8.0, EPOCH)), ("r1.json", rank_file(2, 1, 0, 0..8, 8.0, EPOCH))];
    let (code, stdout, stderr) = run_on(&files, &["report", "r0.json", "r1.json"]);
    assert_eq!(code, Some(0), "{stderr}");
    let flat = flat(&stdout);
    assert!(flat.contains("tie: the ranks with the most work"), "{stdout}");
    assert!(
        flat.matches("0 of 7").count() == 2 && !flat.contains("7 of 7"),
        "no rank is slowest in any step: {stdout}"
    );
    let ties = stdout.lines().filter(|l| l.contains(" tie ┆")).count();
    assert_eq!(ties, 7, "every steady step is a tie: {stdout}");
    let (_, json, _) = run_on(&files, &["report", "r0.json", "r1.json", "--json"]);
    let json: Value = serde_json::from_str(&json).unwrap();
    assert!(json["steps"].as_array().unwrap().iter().all(|s| s["tied"] == true), "{json}");
    assert!(json["ranks"].as_array().unwrap().iter().all(|r| r["slowest_steps"] == 0), "{json}");
}

/// A world of `world` ranks in one cycle, rank `slow` doing 3 ms more work per step.
fn world_files(world: u32, slow: u32) -> Vec<(String, String)> {
    (0..world)
        .map(|rank| {
            let work = 8.0 + if rank == slow { 3.0 } else { f64::from(rank) * 0.01 };
            (format!("r{rank}.json"), rank_steps(world, rank, 0, 0..6, (work, 12.5), EPOCH))
        })
        .collect()
}

#[test]
fn a_large_world_is_summarised_not_laid_out_rank_by_rank() {
    let dir = tempfile::tempdir().unwrap();
    for (name, body) in world_files(40, 17) {
        std::fs::write(dir.path().join(name), body).unwrap();
    }
    let names: Vec<String> = (0..40).map(|r| format!("r{r}.json")).collect();
    let mut args = vec!["report"];
    args.extend(names.iter().map(String::as_str));
    let out = steptrace(&args, dir.path());
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    // The per-step table has the fastest, median and slowest rank, not 40 columns.
    assert!(!stdout.contains("rank 39 ") && !stdout.contains("│ rank 0 "), "{stdout}");
    assert!(stdout.contains("fastest") && stdout.contains("median"), "{stdout}");
    assert!(stdout.contains("(rank 17)"), "the slowest rank is named in each step: {stdout}");
    // The rank table lists the ends and says so.
    assert!(
        flat(&stdout).contains("40 ranks: the 8 with the most and the 8 with the least median work are shown"),
        "{stdout}"
    );
    assert!(stdout.lines().all(|l| l.chars().count() <= 200), "no line is as wide as 40 columns: {stdout}");
}

#[test]
fn compare_refuses_a_run_of_several_ranks_unless_one_rank_is_chosen() {
    let dir = tempfile::tempdir().unwrap();
    write_cycle(&dir.path().join("a"), 2, 0, 1, 4.0);
    write_cycle(&dir.path().join("b"), 2, 0, 1, 1.0);
    let out = steptrace(&["compare", "a", "b"], dir.path());
    let (stdout, stderr) = text(&out);
    assert!(!out.status.success(), "{stdout}");
    assert!(flat(&stderr).contains("holds the traces of 2 ranks: compare one rank's files with --rank N"), "{stderr}");
    let out = steptrace(&["compare", "a", "b", "--rank", "1"], dir.path());
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("steady ms/step"), "{stdout}");
    let out = steptrace(&["compare", "a", "b", "--rank", "5"], dir.path());
    let (_, stderr) = text(&out);
    assert!(!out.status.success() && stderr.contains("no trace of rank 5"), "{stderr}");
}
