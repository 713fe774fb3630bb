//! The book as a reader follows it: every ```` ```sh ```` block of `book/src/*.md` is run,
//! chapter by chapter, each chapter in a fresh temporary directory, with the `steptrace`
//! that cargo built for this test first on PATH; every ```` ```text,output ```` block is
//! compared with the real output. `tests/fixtures` in that directory is the checkout's
//! (read-only inputs, at the path a reader at the checkout's root uses). The convention is in `book/src/reference.md`
//! ("How the book is tested").
//!
//! One chapter (or several, comma-separated): `BOOK_CHAPTER=report.md cargo test -p
//! steptrace-cli --test book`.
//!
//! The test lives in the CLI crate because cargo gives its tests the path of the binary it
//! has just built (`CARGO_BIN_EXE_steptrace`): the book is never run against a stale one.
//! The four-step chapter's program is the `four_step` example of steptrace-burn, "Your model,
//! your loop" runs its `own_model` example, the burn-train chapter its `learner` example, and
//! the multi-GPU chapter runs the tests' `fake_ranks_workload`; cargo builds them all in `cargo
//! test --workspace`, next to this binary (`target/debug/examples`, `target/debug`).

mod cargo_lines;
mod compare;
mod parse;
mod run;
mod unit;

use std::path::{Path, PathBuf};
use std::time::Instant;

/// The book's example programs a chapter runs by name, where cargo puts each (beside
/// `steptrace`), the source each is built from, and the command that builds it.
const EXAMPLES: &[(&str, &str, &str, &str)] = &[
    (
        "four_step",
        "examples/four_step",
        "crates/steptrace-burn/examples/four_step.rs",
        "cargo build -p steptrace-burn --example four_step",
    ),
    (
        "own_model",
        "examples/own_model",
        "crates/steptrace-burn/examples/own_model.rs",
        "cargo build -p steptrace-burn --example own_model",
    ),
    (
        "learner",
        "examples/learner",
        "crates/steptrace-burn/examples/learner.rs",
        "cargo build -p steptrace-burn --example learner",
    ),
    (
        "fake_ranks_workload",
        "fake_ranks_workload",
        "tests/src/bin/fake_ranks_workload.rs",
        "cargo build -p steptrace-tests --bin fake_ranks_workload",
    ),
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The chapters to run: `BOOK_CHAPTER` (comma-separated file names) or every chapter.
fn chapters(src: &Path) -> Vec<String> {
    let mut all: Vec<String> = std::fs::read_dir(src)
        .expect("book/src")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".md") && n != "SUMMARY.md")
        .collect();
    all.sort();
    match std::env::var("BOOK_CHAPTER") {
        Ok(wanted) if !wanted.trim().is_empty() => {
            let wanted: Vec<String> = wanted.split(',').map(|w| w.trim().to_owned()).collect();
            for w in &wanted {
                assert!(all.contains(w), "BOOK_CHAPTER names {w}, which is not a chapter in book/src: {all:?}");
            }
            wanted
        }
        _ => all,
    }
}

/// A folder with `steptrace` and the examples, to put first on PATH.
fn bin_dir(at: &Path, needed: &[&str]) -> PathBuf {
    let bin = at.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let steptrace = PathBuf::from(env!("CARGO_BIN_EXE_steptrace"));
    std::os::unix::fs::symlink(&steptrace, bin.join("steptrace")).unwrap();
    for (name, exe, source, build) in EXAMPLES.iter().filter(|(n, ..)| needed.contains(n)) {
        let exe = steptrace.parent().unwrap().join(exe);
        let built = std::fs::metadata(&exe).and_then(|m| m.modified());
        let written = std::fs::metadata(root().join(source)).and_then(|m| m.modified()).expect("example source");
        match built {
            Ok(built) if built >= written => {}
            Ok(_) => {
                panic!("{} is older than {source}: run `{build}` (cargo test --workspace builds it)", exe.display())
            }
            Err(_) => panic!("{} is missing: run `{build}` (cargo test --workspace builds it)", exe.display()),
        }
        std::os::unix::fs::symlink(&exe, bin.join(name)).unwrap();
    }
    bin
}

#[test]
fn every_command_in_the_book_runs_as_written() {
    let src = root().join("book/src");
    let names = chapters(&src);
    let mut parsed = Vec::new();
    let mut failures = Vec::new();
    for name in &names {
        let text = std::fs::read_to_string(src.join(name)).expect("chapter");
        match parse::chapter(&text) {
            Ok(chapter) => parsed.push((name, chapter)),
            Err(e) => failures.push(format!("{name}: {e}")),
        }
    }
    let needed: Vec<&str> = EXAMPLES
        .iter()
        .map(|(n, ..)| *n)
        .filter(|n| parsed.iter().any(|(_, c)| c.blocks.iter().flat_map(|b| &b.commands).any(|c| c.contains(n))))
        .collect();
    let scratch = tempfile::tempdir().unwrap();
    let env = run::Env { bin: bin_dir(scratch.path(), &needed), home: scratch.path().join("home") };
    std::fs::create_dir_all(&env.home).unwrap();
    let mut times = Vec::new();
    for (name, chapter) in &parsed {
        let dir = tempfile::tempdir().unwrap();
        // The checkout's test fixtures, read-only inputs, at the path a reader at the
        // checkout's root types: `tests/fixtures/...`.
        std::fs::create_dir(dir.path().join("tests")).unwrap();
        std::os::unix::fs::symlink(root().join("tests/fixtures"), dir.path().join("tests/fixtures")).unwrap();
        let started = Instant::now();
        let result = run::chapter(&env, name, chapter, dir.path());
        let secs = started.elapsed().as_secs_f64();
        let commands: usize = chapter.blocks.iter().map(|b| b.commands.len()).sum();
        let verdict = if result.is_ok() { "ok" } else { "FAILED" };
        times.push(format!(
            "{name}: {verdict}, {commands} commands in {} blocks ({} not run), {secs:.1} s",
            chapter.blocks.len(),
            chapter.skipped.len()
        ));
        if let Err(e) = result {
            failures.push(e);
        }
    }
    eprintln!("book chapters:\n  {}", times.join("\n  "));
    if !failures.is_empty() {
        panic!(
            "{} of {} chapters failed (one chapter alone: BOOK_CHAPTER=name.md cargo test -p steptrace-cli --test book):\n\n{}",
            failures.len(),
            names.len(),
            failures.join("\n\n")
        );
    }
}
