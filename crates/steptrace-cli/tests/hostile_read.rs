//! The read side (`report`, `inspect`, `compare`) against hostile input:
//! each row is a file (or a folder, or arguments) and what the real binary
//! must answer: its exit status and a part of its message. Bad input gets
//! a clear error, never a panic; what a file holds never reaches the
//! terminal raw.

mod common;

#[path = "hostile_read/compare.rs"]
mod compare;

use common::{steptrace, text};
use compare::compare_rows;
use serde_json::{json, Value};

const V1: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/steptrace-v1-cuda-mlp-h200.trace.json");

/// What a row writes before running.
enum Input {
    Bytes(&'static str, Vec<u8>),
    Copy(&'static str, &'static str),
}

/// One case: its inputs, the command, and what must (not) be said.
struct Row {
    name: &'static str,
    inputs: Vec<Input>,
    args: &'static [&'static str],
    code: i32,
    says: &'static [&'static str],
    never: &'static [&'static str],
}

fn row(
    name: &'static str,
    inputs: Vec<Input>,
    args: &'static [&'static str],
    code: i32,
    says: &'static [&'static str],
) -> Row {
    Row { name, inputs, args, code, says, never: &[] }
}

fn file(name: &'static str, content: impl Into<Vec<u8>>) -> Input {
    Input::Bytes(name, content.into())
}

/// A steptrace-like trace of `steps` (each `(number, ts, dur)` in µs).
fn steps(list: &[(i64, f64, f64)]) -> Vec<u8> {
    let events: Vec<Value> = list
        .iter()
        .map(|&(n, ts, dur)| json!({"ph":"X","name":format!("ProfilerStep#{n}"),"pid":1,"tid":1,"ts":ts,"dur":dur}))
        .collect();
    serde_json::to_vec(&json!({ "traceEvents": events })).unwrap()
}

/// `bytes` as a gzip file of stored (uncompressed) deflate blocks: valid
/// gzip, written by hand so that the test needs no compressor.
fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut out = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255];
    let mut blocks = bytes.chunks(65_535).peekable();
    if blocks.peek().is_none() {
        out.extend([1, 0, 0, 0xff, 0xff]);
    }
    while let Some(block) = blocks.next() {
        let len = block.len() as u16;
        out.push(u8::from(blocks.peek().is_none()));
        out.extend(len.to_le_bytes());
        out.extend((!len).to_le_bytes());
        out.extend(block);
    }
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
        }
    }
    out.extend((!crc).to_le_bytes());
    out.extend((bytes.len() as u32).to_le_bytes());
    out
}

/// Bytes that look like nothing: a fixed xorshift stream.
fn random_bytes(n: usize) -> Vec<u8> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// A bench result as `steptrace bench --json` writes it, with `edit`
/// applied.
fn bench_json(edit: impl Fn(&mut Value)) -> Vec<u8> {
    let run = |m: f64| steptrace::bench::RunRecord {
        time_to_first_step_ms: 100.0,
        first_step_ms: 50.0,
        cache: "warm".into(),
        step_ms: vec![m, m],
        median_ms: m,
        first_loss: Some(2.0),
        final_loss: Some(1.0),
        held_out: None,
    };
    let result =
        steptrace::bench::BenchResult::new(Default::default(), "cpu".into(), 1, 2, 8, vec![run(1.0), run(1.1)])
            .unwrap();
    let mut doc = serde_json::to_value(result).unwrap();
    edit(&mut doc);
    serde_json::to_vec(&doc).unwrap()
}

/// A partial file as the sink streams it, cut by a crash.
fn partial() -> Vec<u8> {
    let header = json!({"ph":"M","pid":1,"tid":0,"name":"steptrace_segment","args":{"worker":"w","cycle":0,
        "schedule":"active=3","epoch_unix_ms":1,"steptrace_version":"0.1.0","manifest":{"batch_size":4,
        "sync_policy":"step","sync_meaning":"one sync at the end of each step: ProfilerStep#N is the true step time; phase spans are host launch time"}}});
    let mut lines = vec![header.to_string()];
    for n in 0..3 {
        let ts = f64::from(n) * 1000.0;
        lines.push(
            json!({"ph":"B","pid":1,"tid":1,"ts":ts,"name":format!("ProfilerStep#{n}"),"cat":"steptrace\u{1f}7"})
                .to_string(),
        );
        lines.push(json!({"ph":"E","pid":1,"tid":1,"ts":ts + 900.0,"name":format!("ProfilerStep#{n}"),"cat":"steptrace\u{1f}7"}).to_string());
    }
    format!("[\n{},\n", lines.join(",\n")).into_bytes()
}

fn garbage_rows() -> Vec<Row> {
    vec![
        row(
            "empty file",
            vec![file("t.json", "")],
            &["report", "t.json"],
            1,
            &["t.json: invalid trace at byte 0: empty file"],
        ),
        row("empty file, inspect", vec![file("t.json", "  \n")], &["inspect", "t.json"], 1, &["empty file"]),
        row(
            "random bytes",
            vec![file("t.json", random_bytes(4096))],
            &["report", "t.json"],
            1,
            &["t.json: invalid trace at byte"],
        ),
        row(
            "random bytes, inspect",
            vec![file("t.json", random_bytes(4096))],
            &["inspect", "t.json"],
            1,
            &["invalid trace at byte"],
        ),
        row(
            "deep nesting",
            vec![file("t.json", format!("[{{\"args\":{}{}}}]", "[".repeat(100_000), "]".repeat(100_000)))],
            &["report", "t.json"],
            1,
            &["recursion limit exceeded"],
        ),
        row(
            "deep nesting, inspect",
            vec![file("t.json", format!("[{{\"sf\":{}1{}}}]", "{\"a\":".repeat(50_000), "}".repeat(50_000)))],
            &["inspect", "t.json"],
            1,
            &["recursion limit exceeded"],
        ),
        row(
            "NaN token",
            vec![file("t.json", r#"[{"ph":"X","name":"a","ts":NaN,"dur":1}]"#)],
            &["report", "t.json"],
            1,
            &["invalid trace at byte 27: event 0: expected value"],
        ),
        row(
            "Infinity token",
            vec![file("t.json", r#"[{"ph":"X","ts":1,"dur":Infinity}]"#)],
            &["inspect", "t.json"],
            1,
            &["invalid trace at byte"],
        ),
        row(
            "invalid UTF-8",
            vec![file("t.json", b"[{\"ph\":\"X\",\"name\":\"\xff\xfe\",\"ts\":1}]".to_vec())],
            &["report", "t.json"],
            1,
            &["invalid UTF-8"],
        ),
        row(
            "invalid UTF-8, inspect",
            vec![file("t.json", b"[{\"sf\":\"\xc3\",\"ts\":1}]".to_vec())],
            &["inspect", "t.json"],
            1,
            &["invalid UTF-8"],
        ),
        row(
            "an event that is a number",
            vec![file("t.json", "[1,2]")],
            &["report", "t.json"],
            1,
            &["event 0 is not a JSON object"],
        ),
        row(
            "a gzip file that is not",
            vec![file("t.json.gz", vec![0x1f, 0x8b, 8, 0, 1, 2, 3])],
            &["report", "t.json.gz"],
            1,
            &["not a readable gzip file"],
        ),
        Row {
            never: &["os error 2): No such file", "No such file or directory (os error 2): No such"],
            ..row(
                "a missing file",
                vec![],
                &["report", "missing.json"],
                1,
                &["cannot read trace missing.json: No such file or directory"],
            )
        },
    ]
}

fn printing_rows() -> Vec<Row> {
    vec![
        Row {
            never: &["\u{1b}", "\u{7}"],
            ..row(
                "escape sequences in a span name and an argument key",
                vec![file(
                    "t.json",
                    r#"[{"ph":"X","name":"a\u001b[2Jb\u0007","ts":1,"dur":2,"args":{"k\u001b]0;pwned\u0007":1}}]"#,
                )],
                &["report", "t.json"],
                0,
                &["a\\x1b[2Jb\\x07"],
            )
        },
        Row {
            never: &["\u{1b}", "\u{7}", "\u{9b}"],
            ..row(
                "escape sequences, inspect",
                vec![file(
                    "t.json",
                    r#"[{"ph":"X","name":"a\u001b[2J","cat":"c\u009b","ts":1,"dur":2,"args":{"k\u001b]0;t\u0007":1}}]"#,
                )],
                &["inspect", "t.json"],
                0,
                &["a\\x1b[2J", "k\\x1b]0;t\\x07", "c\\u{9b}"],
            )
        },
        Row {
            never: &["\u{1b}"],
            ..row(
                "an escape sequence in a manifest and a path",
                vec![file(
                    "t\u{1b}[2J.json",
                    r#"{"traceEvents":[],"metadata":{"format":"steptrace-chrome-trace/1","manifest":{"backend":"cpu\u001b[31m"}}}"#,
                )],
                &["report", "t\u{1b}[2J.json"],
                0,
                &["backend: cpu\\x1b[31m", "t\\x1b[2J.json"],
            )
        },
        row(
            "an 8 MB span name is cut, with its length",
            vec![file("t.json", format!(r#"[{{"ph":"X","name":"{}","ts":1,"dur":2}}]"#, "a".repeat(8 << 20)))],
            &["report", "t.json"],
            0,
            // The span table wraps its cells: the length may sit on the cell's next line.
            &["…", "(8388608"],
        ),
        row(
            "an 8 MB key is cut, inspect",
            vec![file(
                "t.json",
                format!(r#"[{{"ph":"X","name":"a","ts":1,"dur":2,"args":{{"{}":1}}}}]"#, "k".repeat(8 << 20)),
            )],
            &["inspect", "t.json"],
            0,
            &["… (8388608 bytes)"],
        ),
    ]
}

fn figure_rows() -> Vec<Row> {
    vec![
        row(
            "the same file twice",
            vec![Input::Copy("a.json", V1)],
            &["report", "a.json", "a.json"],
            0,
            &["a.json is given twice: read once", "1 file(s)"],
        ),
        row(
            "a copy under another name",
            vec![Input::Copy("a.json", V1), Input::Copy("b.json", V1)],
            &["report", "a.json", "b.json"],
            0,
            &["b.json has the same content as a.json: counted once", "1 file(s)"],
        ),
        Row {
            never: &["= -", "= −", "-0.", "−0."],
            ..row(
                "negative durations",
                vec![file("t.json", steps(&[(1, 0.0, 1000.0), (2, 1000.0, -889.0), (3, 2000.0, 1000.0)]))],
                &["report", "t.json"],
                0,
                &[
                    "1 event(s) with a missing, negative or non-finite duration",
                    "left out of every figure",
                    "1.00 ms/step",
                ],
            )
        },
        Row {
            never: &["= -", "-0."],
            ..row(
                "step numbers out of time order",
                vec![file("t.json", steps(&[(1, 5000.0, 1000.0), (2, 0.0, 1000.0), (3, 7000.0, 1000.0)]))],
                &["report", "t.json"],
                0,
                &[
                    "do not follow time order",
                    "8.00 ms wall over 3 steady steps = 2.67 ms/step",
                    "<- the figure to quote",
                ],
            )
        },
        Row {
            never: &["00000000000000000000"],
            ..row(
                "a timestamp of 1e308",
                vec![file("t.json", steps(&[(1, 0.0, 1000.0), (2, 1e308, 1000.0), (3, 2000.0, 1e300)]))],
                &["report", "t.json"],
                0,
                &[
                    "2 event(s) with a time no trace can hold",
                    "first event 1: X event \"ProfilerStep#2\" has a timestamp of 1e308 µs",
                ],
            )
        },
        row(
            "duplicate step numbers",
            vec![file("t.json", steps(&[(1, 0.0, 1000.0), (2, 1000.0, 1000.0), (2, 2000.0, 3000.0)]))],
            &["report", "t.json"],
            0,
            &["1 step number(s) written more than once (#2 ×2): each is counted once"],
        ),
        row(
            "100k nested steps",
            vec![file("t.json", nested_steps(100_000))],
            &["report", "t.json"],
            0,
            &["99999 ProfilerStep span(s) start inside an earlier step", "startup  #0 200 ms"],
        ),
        row(
            "a gzip trace",
            vec![file("t.json.gz", gzip(&std::fs::read(V1).unwrap()))],
            &["report", "t.json.gz"],
            0,
            &["t.json.gz (94 events, object format)", "<- the figure to quote"],
        ),
        row(
            "a gzip trace, inspect",
            vec![file("t.gz", gzip(&std::fs::read(V1).unwrap()))],
            &["inspect", "t.gz"],
            0,
            &["nothing flagged"],
        ),
        Row {
            never: &["never overwritten"],
            ..row(
                "a plot into a missing folder",
                vec![Input::Copy("a.json", V1)],
                &["report", "a.json", "--plot", "no/such/dir/x.svg"],
                1,
                &["the folder no/such/dir does not exist"],
            )
        },
    ]
}

/// `depth` ProfilerStep spans, each inside the one before.
fn nested_steps(depth: usize) -> Vec<u8> {
    let mut text = String::from("[");
    for i in 0..depth {
        text.push_str(&format!(r#"{{"ph":"B","name":"ProfilerStep#{i}","pid":1,"tid":1,"ts":{i}}},"#));
    }
    for i in 0..depth {
        let sep = if i + 1 == depth { "]" } else { "," };
        text.push_str(&format!(r#"{{"ph":"E","pid":1,"tid":1,"ts":{}}}{sep}"#, depth + i));
    }
    text.into_bytes()
}

fn hygiene_rows() -> Vec<Row> {
    vec![
        Row {
            never: &["alice@example.com", "/home/bob", "ghp_abc"],
            ..row(
                "secrets in unknown fields and keys",
                vec![file(
                    "t.json",
                    r#"[{"ph":"X","name":"a","ts":1,"dur":2,"foo":"alice@example.com","sf":"/home/bob/x","stack":["ghp_abcdefghijklmnopqrstuvwxyz0123456789"],"bp":{"x":["carol@example.com"]},"dan@example.com":1}]"#,
                )],
                &["inspect", "t.json"],
                3,
                &[
                    "event 0 foo: e-mail address",
                    "event 0 sf: home directory path",
                    "event 0 stack[0]: token",
                    "event 0 bp.x[0]: e-mail",
                    "event 0 dan@example.com (key)",
                ],
            )
        },
        Row {
            never: &["\u{1f}", "flagged ("],
            ..row(
                "a partial file",
                vec![file("w.trace.json.partial", partial())],
                &["inspect", "w.trace.json.partial"],
                0,
                &["cut short: a .partial file", "  steptrace  ×6", "nothing flagged"],
            )
        },
        row(
            "a partial file, report",
            vec![file("w.trace.json.partial", partial())],
            &["report", "w.trace.json.partial"],
            0,
            &["cut short: a .partial file steptrace never finished", "steps    #1 0.90  #2 0.90"],
        ),
        row(
            "a folder of partial files only",
            vec![file("d/w.cycle0.trace.json.partial", partial())],
            &["report", "d"],
            0,
            &["holds only .partial files", "cut short: a .partial file"],
        ),
    ]
}

fn check(row: &Row) {
    let dir = tempfile::tempdir().unwrap();
    for input in &row.inputs {
        let (name, bytes) = match input {
            Input::Bytes(name, bytes) => (*name, bytes.clone()),
            Input::Copy(name, from) => (*name, std::fs::read(from).unwrap()),
        };
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }
    let out = steptrace(row.args, dir.path());
    let (stdout, stderr) = text(&out);
    let all = format!("{stdout}{stderr}");
    let shown = || format!("{}: {:?}\n{}", row.name, row.args, &all[..all.len().min(4000)]);
    assert_eq!(out.status.code(), Some(row.code), "{}", shown());
    assert!(!all.contains("panicked"), "{}", shown());
    for part in row.says {
        assert!(all.contains(part), "{}: missing {part:?}\n{}", row.name, shown());
    }
    for part in row.never {
        assert!(!all.contains(part), "{}: must not say {part:?}\n{}", row.name, shown());
    }
    // Nothing of a file reaches the terminal in full: no line runs on.
    assert!(
        all.lines().all(|l| l.chars().count() < 2000),
        "{}: a line of {} chars",
        row.name,
        all.lines().map(str::len).max().unwrap_or(0)
    );
}

#[test]
fn garbage_gets_a_clear_error() {
    garbage_rows().iter().for_each(check);
}

#[test]
fn names_keys_and_values_are_printed_escaped_and_cut() {
    printing_rows().iter().for_each(check);
}

#[test]
fn report_validates_what_it_reads() {
    figure_rows().iter().for_each(check);
}

#[test]
fn inspect_walks_every_field() {
    hygiene_rows().iter().for_each(check);
}

#[test]
fn compare_refuses_impossible_results_and_bad_arguments() {
    compare_rows().iter().for_each(check);
}

#[test]
fn a_redacted_copy_holds_nothing_flagged_in_any_field() {
    let dir = tempfile::tempdir().unwrap();
    let planted = r#"[{"ph":"X","name":"a","ts":1,"dur":2,"foo":"alice@example.com","estack":[{"f":"/Users/bob/x"}],"erin@example.com":{"k":1}}]"#;
    std::fs::write(dir.path().join("t.json"), planted).unwrap();
    let out = steptrace(&["inspect", "t.json", "--redact", "shared.json"], dir.path());
    assert_eq!(out.status.code(), Some(3), "{:?}", text(&out));
    assert!(text(&out).1.contains("3 strings replaced") && text(&out).1.contains("scans clean"), "{:?}", text(&out));
    let copy = std::fs::read_to_string(dir.path().join("shared.json")).unwrap();
    for secret in ["alice", "bob", "erin"] {
        assert!(!copy.contains(secret), "{secret} in {copy}");
    }
    let again = steptrace(&["inspect", "shared.json"], dir.path());
    assert_eq!(again.status.code(), Some(0), "{:?}", text(&again));
    // An existing output is never overwritten, and says so.
    let out = steptrace(&["inspect", "t.json", "--redact", "shared.json"], dir.path());
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out).1.contains("shared.json already exists: a sanitised copy never overwrites a file"),
        "{:?}",
        text(&out)
    );
}

#[test]
fn compare_with_no_usable_backend_fails() {
    let dir = tempfile::tempdir().unwrap();
    if common::cuda_available(dir.path()) {
        return;
    }
    let out = steptrace(&["compare", "--backends", "cuda", "--runs", "1", "--steps", "1", "--warmup", "0"], dir.path());
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(stdout.contains("not available"), "{stdout}");
    assert!(stderr.contains("none of the backends asked for (cuda) is available here"), "{stderr}");
}
