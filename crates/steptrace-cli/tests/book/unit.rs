//! The parser and the output comparison on small inline chapters.

use super::compare::{check, line_matches};
use super::parse::{chapter, commands, Expect};

#[test]
fn sh_blocks_their_output_and_markers_are_read_with_their_lines() {
    let md = "# T\n\nRun it:\n\n```sh\nsteptrace backends\n# a comment\nsteptrace train --backend cpu \\\n  --steps 3\n```\n\n```text,output\nbackend: cpu\n```\n\nNot run by the book's tests: it needs CUDA.\n\n```sh,no-test\nsteptrace train --backend cuda\n```\n\n```sh,fails=2\nsteptrace nonsense\n```\n\n```text\nan illustration\n```\n\n```rust\nfn main() {}\n```\n";
    let c = chapter(md).unwrap();
    assert_eq!(c.blocks.len(), 2);
    assert_eq!(c.blocks[0].line, 5);
    assert_eq!(c.blocks[0].commands, ["steptrace backends", "steptrace train --backend cpu --steps 3"]);
    assert_eq!(c.blocks[0].expect, Expect::Success);
    let out = c.blocks[0].output.as_ref().unwrap();
    assert_eq!((out.line, out.text.as_str()), (12, "backend: cpu\n"));
    assert_eq!(c.skipped, [18]);
    assert_eq!(c.blocks[1].expect, Expect::Failure(Some(2)));
    assert_eq!(c.blocks[1].output, None);
}

#[test]
fn a_no_test_block_needs_its_visible_reason() {
    let bare = "Some text.\n\n```sh,no-test\nsteptrace train --backend cuda\n```\n";
    let err = chapter(bare).unwrap_err();
    assert!(err.contains("line 3") && err.contains("Not run by the book's tests:"), "{err}");
    // The mark without a reason, or in an earlier paragraph, is not enough.
    assert!(chapter("Not run by the book's tests:\n\n```sh,no-test\nx\n```\n").is_err());
    let earlier = "Not run by the book's tests: CUDA only.\n\nAnother paragraph.\n\n```sh,no-test\nx\n```\n";
    assert!(chapter(earlier).is_err());
    let inline = "On an H200 (Not run by the book's tests: it needs `CUDA`):\n\n```sh,no-test\nx\n```\n";
    assert_eq!(chapter(inline).unwrap().skipped, [3]);
}

#[test]
fn an_output_block_must_follow_a_sh_block() {
    let err = chapter("Text.\n\n```text,output\nx\n```\n").unwrap_err();
    assert!(err.contains("line 3") && err.contains("must follow"), "{err}");
    let between = "```sh\nsteptrace backends\n```\n\nSome words.\n\n```text,output\nx\n```\n";
    assert!(chapter(between).is_err());
    // After a block that is not run, the output is shown but not compared.
    let no_test = "Not run by the book's tests: CUDA.\n\n```sh,no-test\nx\n```\n\n```text,output\ny\n```\n";
    assert!(chapter(no_test).unwrap().blocks.is_empty());
}

#[test]
fn bad_blocks_are_refused_clearly() {
    assert!(chapter("```sh,fail\nx\n```\n").unwrap_err().contains("unknown shell block"));
    assert!(chapter("```sh,fails=0\nx\n```\n").is_err());
    assert!(chapter("```sh\n# only a comment\n```\n").unwrap_err().contains("no command"));
    assert!(commands("steptrace report \\\n").unwrap_err().contains("nothing follows"));
    let err = commands("for i in 1 2; do\n  steptrace train --seed $i\ndone").unwrap_err();
    assert!(err.contains("goes on to the next line"), "{err}");
    assert_eq!(
        commands("for i in 1 2; do \\\n  steptrace train --seed $i; \\\ndone").unwrap(),
        ["for i in 1 2; do steptrace train --seed $i; done"]
    );
    let err = commands("cd runs\nsteptrace report .").unwrap_err();
    assert!(err.contains("`cd`"), "{err}");
}

#[test]
fn numbers_are_masked_and_dots_match_any_text() {
    assert!(line_matches("first step 40652.3 ms", "first step 1.2 ms"));
    assert!(line_matches("median 12.99  p90 16.76", "median 0.71  p90 0.89"));
    assert!(line_matches("1,234 events", "987 events"));
    assert!(line_matches(
        "wrote traces/mlp-cpu.cycle0.20261201T180129.778Z.trace.json",
        "wrote traces/mlp-cpu.cycle1.20271111T010101.001Z.trace.json"
    ));
    assert!(line_matches("steps [12, 13, 14]", "steps [17, 18, 19]"));
    assert!(line_matches("took 5 s.", "took 12 s."));
    assert!(line_matches("backend: cpu (...)", "backend: cpu (Intel Xeon, 2 threads)"));
    assert!(line_matches("a … b", "a whatever b"));
    assert!(line_matches("trailing   ", "trailing"));
    // Table columns widen with their numbers.
    assert!(line_matches("│ first step ┆ 1.2 ms  │", "│ first step ┆ 40652.3 ms │"));
    assert!(line_matches("╞═══╪════╡", "╞══════╪══╡"));
    assert!(!line_matches("│ a ┆ b │", "│ a ┆ c │"));
    // Numbers match numbers only, and words still count.
    assert!(!line_matches("first step 40.3 ms", "first step n/a ms"));
    assert!(!line_matches("backend: cpu", "backend: wgpu"));
    assert!(!line_matches("12 steps", "12 steps more"));
    assert!(!line_matches("cycle 0", "cycle"));
}

#[test]
fn a_line_of_dots_matches_any_number_of_lines() {
    let actual = "backend: cpu\nNOTE\ntable\nrow 1\nrow 2\nwrote a\nwrote b\n\n";
    assert!(check("backend: cpu\n...\nwrote a\nwrote b\n", actual).is_ok());
    assert!(check("backend: cpu\nNOTE\n...\nrow 7\n...\nwrote b", actual).is_ok());
    assert!(check("...\n", actual).is_ok());
    assert!(check("backend: cpu\n...\nNOTE\n...\n", actual).is_ok(), "zero lines");
    assert!(check("backend: cpu\nwrote a\n", actual).is_err());
    assert!(check("backend: cpu\n...\nwrote b\nwrote c\n", actual).is_err());
    // Every line is accounted for: output beyond the block without `...` fails.
    let err = check("backend: cpu\nNOTE\n", actual).unwrap_err();
    assert!(err.contains("more lines"), "{err}");
}

#[test]
fn a_mismatch_names_the_line_and_shows_both_texts() {
    let err = check("backend: cpu\n...\nwrote traces/x\n", "backend: cpu\nsomething\nwrote runs/x\n").unwrap_err();
    assert!(err.contains("expected line 3") && err.contains("- wrote traces/x"), "{err}");
    assert!(err.contains("--- actual") && err.contains("wrote runs/x"), "{err}");
    let err = check("a\nb\n", "a\nc\n").unwrap_err();
    assert!(err.contains("- b") && err.contains("+ c    (actual line 2)"), "{err}");
}

#[test]
fn the_runner_checks_exit_status_output_and_order() {
    use super::run;
    let scratch = tempfile::tempdir().unwrap();
    let env = run::Env { bin: scratch.path().join("bin"), home: scratch.path().to_owned() };
    let dir = tempfile::tempdir().unwrap();
    let ok = "```sh\nmkdir runs\necho made > runs/a\ncat runs/a\n```\n\n```text,output\nmade\n```\n\n```sh,fails=3\nsh -c 'echo no >&2; exit 3'\n```\n\n```text,output\nno\n```\n";
    run::chapter(&env, "ok.md", &chapter(ok).unwrap(), dir.path()).unwrap();
    assert!(dir.path().join("runs/a").exists(), "commands run in the chapter's directory");

    let cases = [
        ("```sh\nfalse\n```\n", "exited with 1, expected 0"),
        ("```sh,fails\ntrue\n```\n", "exited with 0, but the block is marked"),
        ("```sh,fails=2\nexit 1\n```\n", "exited with 1, expected 2"),
        ("```sh\necho 41 apples\n```\n\n```text,output\n12 pears\n```\n", "- 12 pears"),
    ];
    for (md, wanted) in cases {
        let dir = tempfile::tempdir().unwrap();
        let err = run::chapter(&env, "bad.md", &chapter(md).unwrap(), dir.path()).unwrap_err();
        assert!(err.contains("bad.md, block at line 1") && err.contains(wanted), "{md}\n{err}");
    }
}
