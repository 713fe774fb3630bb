//! steptrace's own spans kept around tracing (`collect::direct`): the file a run writes with
//! them is the file the same run writes through tracing's registry, line for line but for the
//! times and thread numbers. One test in its own process: it installs the global subscriber.

use std::path::Path;

use serde_json::Value;
use steptrace::format::names::{BACKWARD, DATA_LOAD, FORWARD, LAYER_NAME_CHARS, LOSS, TARGET, TRANSFER_H2D};
use steptrace::format::tag::SEPARATOR;
use steptrace::{own_span, Profiler, Schedule};

const SCHEDULE: &str = "wait=1,warmup=1,active=2";
const STEPS: u64 = 4;
/// `backward` spans a step (two records each): more than a thread's buffer of 1,024 records.
const BACKWARDS: usize = 700;

/// One step of a small model: spans of every kind the direct path meets, nested, with an
/// event, spans with fields (one of steptrace's own, one through tracing inside it), and a
/// thread of its own. Returns whether `forward` went around
/// tracing.
fn one_step(step: u64, long_name: &str) -> bool {
    let forward = own_span!(FORWARD);
    let direct = forward.is_direct();
    steptrace::layer("encoder.block\n1", || {
        let step_bytes = step * 1000;
        // A value may read a variable a field's name shadows.
        let load = own_span!(DATA_LOAD, batch = step, step_bytes = step_bytes + step);
        assert_eq!(load.is_direct(), direct);
        let _h2d = tracing::info_span!(target: TARGET, TRANSFER_H2D, batch = step, bytes = %"12 B").entered();
        tracing::info!(target: TARGET, step, "inside a layer");
    });
    steptrace::layer(long_name, || steptrace::layer("", || ()));
    drop(forward);
    // More records than a thread's buffer holds: handed over before the step ends.
    for _ in 0..BACKWARDS {
        let _backward = own_span!(BACKWARD);
    }
    let dispatch = tracing::dispatcher::get_default(|d| d.clone());
    std::thread::scope(|s| {
        s.spawn(|| {
            tracing::dispatcher::with_default(&dispatch, || {
                let other = own_span!(LOSS);
                assert!(!other.is_direct(), "a thread that does not step goes through tracing");
            })
        });
    });
    direct
}

/// A saved trace's complete spans and instants, in file order per thread (threads numbered
/// by first appearance), each with its depth among the thread's spans and its args.
fn shape(path: &Path) -> Vec<(usize, String, String, usize, Value)> {
    let text = std::fs::read_to_string(path).expect("trace");
    let file: Value = serde_json::from_str(&text).expect("JSON");
    let events = file["traceEvents"].as_array().expect("events");
    let mut threads: Vec<u64> = Vec::new();
    let mut out = Vec::new();
    let spans: Vec<&Value> = events.iter().filter(|e| e["ph"] == "X").collect();
    for e in events.iter().filter(|e| e["ph"] == "X" || e["ph"] == "i") {
        if e["cat"].as_str().is_some_and(|c| !c.starts_with(TARGET)) {
            continue;
        }
        let tid = e["tid"].as_u64().expect("tid");
        let thread = threads.iter().position(|t| *t == tid).unwrap_or_else(|| {
            threads.push(tid);
            threads.len() - 1
        });
        let (ts, end) = (e["ts"].as_f64().unwrap(), e["ts"].as_f64().unwrap() + e["dur"].as_f64().unwrap_or(0.0));
        let depth = spans
            .iter()
            .filter(|s| s["tid"] == e["tid"] && !std::ptr::eq(**s, e))
            .filter(|s| {
                let start = s["ts"].as_f64().unwrap();
                start <= ts && end <= start + s["dur"].as_f64().unwrap()
            })
            .count();
        let cat = e["cat"].as_str().unwrap_or("").split(SEPARATOR).next().unwrap_or("").to_owned();
        let name = e["name"].as_str().unwrap_or("").to_owned();
        let mut args = e["args"].clone();
        if let Some(args) = args.as_object_mut() {
            // The step's args carry its times, which differ between runs.
            args.retain(|key, _| !key.contains("ms") && !key.contains("time"));
        }
        out.push((thread, name, cat, depth, args));
    }
    out
}

/// Runs the steps; returns, for each, whether its spans went around tracing and whether its
/// `ProfilerStep` span did.
fn run(dir: &Path, profiler: &mut Profiler, long_name: &str) -> Vec<(bool, bool)> {
    profiler.start();
    let direct = (0..STEPS)
        .map(|step| {
            let step_direct = profiler.step_is_direct();
            let direct = one_step(step, long_name);
            profiler.step();
            // Time for the writer to read the first recorded step's announcement: later steps'
            // records then reach the file at the profiler's flushes, unannounced (either way,
            // the file is the same).
            std::thread::sleep(std::time::Duration::from_millis(20));
            (direct, step_direct)
        })
        .collect();
    assert!(dir.exists());
    direct
}

#[test]
fn own_spans_kept_around_tracing_write_what_tracing_writes() {
    if std::env::var_os("STEPTRACE_OWN_SPANS").is_some() {
        eprintln!("STEPTRACE_OWN_SPANS is set: this test compares the two paths it chooses between");
        return;
    }
    let long_name: String = "x".repeat(LAYER_NAME_CHARS + 9);
    let schedule: Schedule = SCHEDULE.parse().unwrap();

    // The global gate, installed by `try_install`: the direct path. Each run has a thread of
    // its own (tracing-chrome binds a thread to the first sink it writes to).
    let direct_dir = tempfile::tempdir().unwrap();
    let (path, long) = (direct_dir.path().to_owned(), long_name.clone());
    let (direct, direct_saved) = std::thread::spawn(move || {
        let mut profiler = Profiler::builder(schedule).out_dir(&path).try_install().expect("install");
        let direct = run(&path, &mut profiler, &long);
        (direct, profiler.finish().expect("finish"))
    })
    .join()
    .unwrap();
    // The wait step makes no span at all; the warmup and active steps keep theirs, and their
    // step spans, directly.
    assert_eq!(direct, [(false, false), (true, true), (true, true), (true, true)]);
    assert_eq!(direct_saved.len(), 1);
    // A finished profiler leaves steptrace's spans to tracing again.
    assert!(!own_span!(FORWARD).is_direct());

    // The same run through tracing's registry, with a scoped subscriber.
    let tracing_dir = tempfile::tempdir().unwrap();
    let (path, long) = (tracing_dir.path().to_owned(), long_name.clone());
    let (through_tracing, tracing_saved) = std::thread::spawn(move || {
        use tracing_subscriber::prelude::*;
        let (layer, mut profiler) = Profiler::builder(schedule).out_dir(&path).build_global().unwrap();
        let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
        tracing::dispatcher::with_default(&dispatch, || {
            let direct = run(&path, &mut profiler, &long);
            (direct, profiler.finish().expect("finish"))
        })
    })
    .join()
    .unwrap();
    assert_eq!(through_tracing, [(false, false); STEPS as usize]);
    assert_eq!(tracing_saved.len(), 1);

    // Each trace says which path steptrace's own spans took.
    let own_spans = |path: &Path| {
        let file: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        file["metadata"]["own_spans"].as_str().unwrap_or("").to_owned()
    };
    assert_eq!(own_spans(&direct_saved[0].path), "direct");
    assert_eq!(own_spans(&tracing_saved[0].path), "tracing");

    let (direct, through_tracing) = (shape(&direct_saved[0].path), shape(&tracing_saved[0].path));
    assert_eq!(direct, through_tracing);
    // And what both hold: two active steps, each with its layers under `forward` (the
    // names cleaned and cut), the span with fields inside, and the other thread's span.
    let count = |name: &str| direct.iter().filter(|e| e.1 == name).count();
    assert_eq!(count(FORWARD), 2, "{direct:#?}");
    assert_eq!(count("encoder.block1"), 2);
    assert_eq!(count(&"x".repeat(LAYER_NAME_CHARS)), 2);
    assert_eq!(count("layer"), 2, "a layer without a visible name keeps the span's name");
    assert_eq!(count(LOSS), 2);
    assert_eq!(count(BACKWARD), 2 * BACKWARDS);
    assert_eq!(count("inside a layer"), 2);
    let load = direct.iter().find(|e| e.1 == DATA_LOAD).expect("data.load");
    assert_eq!(load.3, 3, "data.load in its layer, in forward, in the step: {direct:#?}");
    assert_eq!(load.4["batch"], "2");
    assert_eq!(load.4["step_bytes"], "2002");
    assert_eq!(load.4.as_object().map(|args| args.len()), Some(2), "{:?}", load.4);
    let h2d = direct.iter().find(|e| e.1 == TRANSFER_H2D).expect("transfer.h2d");
    assert_eq!((h2d.3, &h2d.4["bytes"]), (4, &Value::from("12 B")));
    let loss = direct.iter().find(|e| e.1 == LOSS).unwrap();
    assert_ne!(loss.0, load.0, "the other thread's span is on its own thread");
}
