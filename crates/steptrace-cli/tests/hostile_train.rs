//! `steptrace train` and `steptrace bench` on absurd arguments: each gets a
//! clear error naming the problem, never a panic, an abort or a silent exit 0,
//! and nothing is written.

mod common;

use common::{steptrace, text};

/// (arguments after `train --backend cpu --quiet`, what stderr must say)
const CASES: &[(&str, &str)] = &[
    ("--schedule wait=18446744073709551615,active=2", "`wait`=18446744073709551615"),
    ("--schedule skip_first=1,warmup=18446744073709551615,active=1", "`warmup`"),
    ("--steps 30 --schedule wait=0,warmup=1,active=18446744073709551615", "`active`"),
    ("--schedule wait=1,active=0", "active must be at least 1"),
    ("--schedule wait=-1,active=2", "`wait` must be a non-negative integer"),
    ("--schedule wait=1,wait=2,active=1", "more than once"),
    ("--lr nan", "learning rate"),
    ("--lr inf", "learning rate"),
    ("--lr 0", "learning rate"),
    ("--model transformer --dataset shakespeare --seq-len 0", "seq-len must be in 1..=4096"),
    ("--model transformer --dataset shakespeare --seq-len 100000000", "seq-len must be in 1..=4096"),
    ("--model transformer --dataset digits", "character language model"),
    ("--batch 0", "batch size must be at least 1"),
    ("--batch 100000000000", "bytes of host memory"),
    ("--dataset synthetic --synthetic-shape 1,100000,100000", "bytes of host memory"),
    ("--dataset synthetic --synthetic-shape 0,8,8", "three positive numbers"),
    ("--model convnet --dataset synthetic --synthetic-shape 1,2,2", "H, W >= 4"),
    ("--steps 0", "steps must be at least 1"),
    ("--json /nonexistent-dir/run.json", "cannot create --json /nonexistent-dir/run.json"),
    ("--out /proc/version/traces", "not usable"),
];

#[test]
fn absurd_train_arguments_get_clear_errors_and_write_nothing() {
    for (args, want) in CASES {
        let dir = tempfile::tempdir().unwrap();
        let all: Vec<&str> = ["train", "--backend", "cpu", "--quiet"].into_iter().chain(args.split(' ')).collect();
        let out = steptrace(&all, dir.path());
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(1), "{args}: {stdout}{stderr}");
        assert!(stderr.contains(want), "{args}: wanted {want:?} in {stderr}");
        assert!(!stderr.contains("panicked") && !stderr.contains("RUST_BACKTRACE"), "{args}: {stderr}");
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert!(left.is_empty(), "{args}: left {left:?}");
    }
}

#[test]
fn an_os_error_is_printed_once() {
    let dir = tempfile::tempdir().unwrap();
    let out = steptrace(&["train", "--backend", "cpu", "--quiet", "--json", "/nonexistent-dir/run.json"], dir.path());
    let (_, stderr) = text(&out);
    assert_eq!(stderr.matches("No such file or directory").count(), 1, "{stderr}");
}

#[test]
fn an_existing_json_is_never_overwritten_and_is_refused_before_training() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("run.json"), b"precious").unwrap();
    let out = steptrace(&["train", "--backend", "cpu", "--quiet", "--json", "run.json"], dir.path());
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr.contains("already exists"), "{stderr}");
    assert!(!stdout.contains("steady"), "refused before training: {stdout}");
    assert_eq!(std::fs::read(dir.path().join("run.json")).unwrap(), b"precious");
}
