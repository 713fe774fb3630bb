//! `compare`'s rows: results that cannot be compared, and arguments that make no sense.

use serde_json::json;

use super::{bench_json, file, random_bytes, row, Row};

pub(super) fn compare_rows() -> Vec<Row> {
    let ok = || file("a.json", bench_json(|_| {}));
    vec![
        row(
            "negative times",
            vec![ok(), file("b.json", bench_json(|d| d["runs"][0]["median_ms"] = json!(-0.84)))],
            &["compare", "a.json", "b.json"],
            1,
            &["cannot compare b.json: run 0 median_ms is -0.84"],
        ),
        row(
            "zero times",
            vec![ok(), file("b.json", bench_json(|d| d["runs"][1]["step_ms"][0] = json!(0.0)))],
            &["compare", "a.json", "b.json"],
            1,
            &["run 1 step_ms[0] is 0"],
        ),
        row(
            "an infinite time",
            vec![
                ok(),
                file(
                    "b.json",
                    String::from_utf8(bench_json(|_| {})).unwrap().replacen(
                        "\"median_ms\":1.0",
                        "\"median_ms\":1e999",
                        1,
                    ),
                ),
            ],
            &["compare", "a.json", "b.json"],
            1,
            &["cannot compare b.json: not a steptrace bench result", "number out of range"],
        ),
        row(
            "a newer format",
            vec![ok(), file("b.json", bench_json(|d| d["format"] = json!("steptrace-bench/2")))],
            &["compare", "a.json", "b.json"],
            1,
            &["format steptrace-bench/2, newer than this steptrace reads (steptrace-bench/1)"],
        ),
        row(
            "another format",
            vec![ok(), file("b.json", bench_json(|d| d["format"] = json!("other/1")))],
            &["compare", "a.json", "b.json"],
            1,
            &["not a steptrace bench result"],
        ),
        row(
            "garbage",
            vec![ok(), file("b.json", random_bytes(100))],
            &["compare", "a.json", "b.json"],
            1,
            &["cannot compare b.json: not a steptrace bench result"],
        ),
        row(
            "an unknown backend",
            vec![],
            &["compare", "--backends", "tpu,cpu"],
            2,
            &["invalid value 'tpu' for '--backends"],
        ),
        row(
            "an empty backend list",
            vec![],
            &["compare", "--backends", ""],
            2,
            &["a value is required for '--backends"],
        ),
        row(
            "zero runs",
            vec![],
            &["compare", "--backends", "cpu", "--runs", "0"],
            1,
            &["--runs and --steps must be at least 1"],
        ),
        row(
            "zero steps",
            vec![],
            &["compare", "--backends", "cpu", "--steps", "0"],
            1,
            &["--runs and --steps must be at least 1"],
        ),
    ]
}
