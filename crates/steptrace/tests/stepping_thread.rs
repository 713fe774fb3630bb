//! The stepping thread's spans travel to the writer in batches (`collect::batch`): the file
//! must hold what it held when every begin and end went through tracing-chrome alone:
//! every span, nested as it ran, with its name and args, events and counters in their
//! place, other threads' spans beside them, and nothing of the batches themselves.

use serde_json::Value;
use steptrace::{Profiler, Schedule};
use tracing_subscriber::prelude::*;

const STEPS: u64 = 4;

/// Runs a window of two recorded steps (after one warmup step) whose every step does the
/// same [`work`] on the stepping thread and on a second one. Returns the file's events.
fn run(global: bool, include_args: bool) -> Vec<Value> {
    let dir = tempfile::tempdir().unwrap();
    let schedule: Schedule = "wait=0,warmup=1,active=2,repeat=1".parse().unwrap();
    let builder = Profiler::builder(schedule).out_dir(dir.path()).targets(["user=info"]).include_args(include_args);
    let (dispatch, mut profiler) = if global {
        let (layer, profiler) = builder.build_global().unwrap();
        (tracing::Dispatch::new(tracing_subscriber::registry().with(layer)), profiler)
    } else {
        let (layer, profiler) = builder.build().unwrap();
        (tracing::Dispatch::new(tracing_subscriber::registry().with(layer)), profiler)
    };
    let saved = tracing::dispatcher::with_default(&dispatch, || {
        profiler.start();
        for n in 0..STEPS {
            // The same work on a second thread, whose events go through tracing-chrome alone.
            let dispatch = dispatch.clone();
            let loader = std::thread::spawn(move || {
                tracing::dispatcher::with_default(&dispatch, || {
                    drop(tracing::info_span!(target: "steptrace", "data.load", batch = n).entered());
                    work(n);
                })
            });
            loader.join().unwrap();
            work(n);
            drop(tracing::info_span!(target: "steptrace", "backward").entered());
            profiler.step();
        }
        profiler.finish().unwrap()
    });
    assert_eq!(saved.len(), 1, "{saved:?}");
    let text = std::fs::read_to_string(&saved[0].path).unwrap();
    assert!(!text.contains("steptrace::batch"), "an announcement was left in the file");
    let file: Value = serde_json::from_str(&text).unwrap();
    file["traceEvents"].as_array().unwrap().clone()
}

/// A step's forward: a span with a field, a layer, an opted-in crate's span and event, a
/// counter and a span without fields.
fn work(n: u64) {
    let _forward = tracing::info_span!(target: "steptrace", "forward", batch = n, split = "train").entered();
    steptrace::layer("conv1", || {
        drop(tracing::info_span!(target: "user", "work").entered());
        tracing::info!(target: "user", note = "a \"quoted\" value", "note");
    });
    tracing::info!(target: "steptrace::counter", bytes = 1000 + n, "device memory");
    // The batches' own target, used by someone else: dropped, never taken for an announcement.
    tracing::info!(target: "steptrace::batch", "1");
    drop(tracing::info_span!(target: "steptrace", "loss").entered());
}

fn named<'a>(events: &'a [Value], name: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["name"] == name).collect()
}

fn span(e: &Value) -> (f64, f64) {
    let ts = e["ts"].as_f64().unwrap();
    (ts, ts + e["dur"].as_f64().unwrap())
}

fn inside(inner: &Value, outer: &Value) -> bool {
    let ((a, b), (c, d)) = (span(inner), span(outer));
    inner["tid"] == outer["tid"] && c <= a && b <= d
}

fn check(events: &[Value], include_args: bool) {
    let steps = named(events, "ProfilerStep#1").len() + named(events, "ProfilerStep#2").len();
    assert_eq!(steps, 2, "the two recorded steps");
    assert!(named(events, "ProfilerStep#0").is_empty(), "the warmup step is cut");
    for (name, each_step) in [("forward", 2), ("conv1", 2), ("work", 2), ("loss", 2), ("backward", 1), ("data.load", 1)]
    {
        assert_eq!(named(events, name).len(), 2 * each_step, "{name}: on each thread, in each recorded step");
        assert!(named(events, name).iter().all(|e| e["ph"] == "X" && e["dur"].as_f64().unwrap() >= 0.0), "{name}");
    }
    let notes = named(events, "note");
    assert_eq!(notes.len(), 4);
    let counters: Vec<_> = events.iter().filter(|e| e["ph"] == "C").collect();
    assert_eq!(counters.len(), 4, "{counters:?}");

    // The stepping thread's lines say what tracing-chrome says of the same work on the other
    // thread: names, categories, phases and args alike.
    let step_tid = named(events, "ProfilerStep#1")[0]["tid"].clone();
    let shape = |on_step_thread: bool| {
        let mut shapes: Vec<String> = events
            .iter()
            .filter(|e| (e["tid"] == step_tid) == on_step_thread)
            .filter(|e| e["ph"] != "M" && e["name"] != "backward" && e["name"] != "data.load")
            .filter(|e| !e["name"].as_str().unwrap_or("").starts_with("ProfilerStep"))
            .map(|e| {
                format!(
                    "{} {} {} {}",
                    e["ph"],
                    e["name"],
                    e["cat"],
                    e.get("args").map(Value::to_string).unwrap_or_default()
                )
            })
            .collect();
        shapes.sort();
        shapes
    };
    assert_eq!(shape(true), shape(false));
    assert!(!shape(true).is_empty());
    for n in 1..=2u64 {
        let step = named(events, &format!("ProfilerStep#{n}"))[0];
        let on_step_thread = |e: &&Value| e["tid"] == step["tid"];
        let notes: Vec<_> = notes.iter().copied().filter(on_step_thread).collect();
        let counters: Vec<_> = counters.iter().copied().filter(on_step_thread).collect();
        let forward = named(events, "forward").into_iter().find(|e| inside(e, step)).expect("forward in its step");
        let conv1 = named(events, "conv1").into_iter().find(|e| inside(e, forward)).expect("conv1 in forward");
        let work = named(events, "work").into_iter().find(|e| inside(e, conv1)).expect("work in conv1");
        assert_eq!(work["cat"], "user");
        let loss = named(events, "loss").into_iter().find(|e| inside(e, forward)).expect("loss in forward");
        assert!(span(work).1 <= span(loss).0, "work before loss");
        let backward = named(events, "backward").into_iter().find(|e| inside(e, step)).expect("backward in its step");
        assert!(span(forward).1 <= span(backward).0);
        // The event sits between the layer's inner span and its end, the counter after the layer.
        let note = notes.iter().find(|e| {
            let ts = e["ts"].as_f64().unwrap();
            e["tid"] == step["tid"] && span(work).1 <= ts && ts <= span(conv1).1
        });
        assert!(note.is_some(), "note in conv1 after work: {notes:?}");
        let counter = counters.iter().find(|c| {
            let ts = c["ts"].as_f64().unwrap();
            span(conv1).1 <= ts && ts <= span(loss).0
        });
        let counter = counter.expect("the counter between conv1 and loss");
        if include_args {
            assert_eq!(counter["args"]["bytes"].as_f64(), Some(1000.0 + n as f64), "{counter}");
        }
        let expected = include_args.then(|| n.to_string());
        assert_eq!(forward["args"]["batch"].as_str().map(str::to_owned), expected, "{forward}");
        assert_eq!(conv1.get("args"), None, "a layer's name is its label");
    }
    let loads = named(events, "data.load");
    assert!(loads.iter().all(|e| e["tid"] != step_tid), "the loader's spans stay on their threads");
    if include_args {
        let batches: Vec<_> = loads.iter().map(|e| e["args"]["batch"].as_str().unwrap().to_owned()).collect();
        assert_eq!(batches, ["1", "2"]);
    }
}

#[test]
fn the_stepping_threads_spans_nest_and_keep_their_names_and_args() {
    check(&run(true, true), true);
}

#[test]
fn the_same_through_a_per_layer_filter() {
    check(&run(false, true), true);
}

#[test]
fn the_same_without_args() {
    check(&run(true, false), false);
}

#[test]
fn a_span_keeps_its_args_on_whichever_thread_enters_it() {
    let dir = tempfile::tempdir().unwrap();
    let schedule: Schedule = "wait=0,warmup=0,active=1,repeat=1".parse().unwrap();
    let (layer, mut profiler) = Profiler::builder(schedule).out_dir(dir.path()).build_global().unwrap();
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    let saved = tracing::dispatcher::with_default(&dispatch, || {
        profiler.start();
        // Made on the stepping thread, entered on another one.
        let made_here = tracing::info_span!(target: "steptrace", "made_here", batch = 1u64);
        let d = dispatch.clone();
        std::thread::spawn(move || tracing::dispatcher::with_default(&d, || drop(made_here.entered()))).join().unwrap();
        // Made on another thread, entered on the stepping one.
        let d = dispatch.clone();
        let made_there = std::thread::spawn(move || {
            tracing::dispatcher::with_default(
                &d,
                || tracing::info_span!(target: "steptrace", "made_there", batch = 2u64),
            )
        })
        .join()
        .unwrap();
        drop(made_there.entered());
        profiler.step();
        profiler.finish().unwrap()
    });
    let text = std::fs::read_to_string(&saved[0].path).unwrap();
    let file: Value = serde_json::from_str(&text).unwrap();
    let events = file["traceEvents"].as_array().unwrap();
    for (name, batch) in [("made_here", "1"), ("made_there", "2")] {
        let span = named(events, name);
        assert_eq!(span.len(), 1, "{name}: {events:?}");
        assert_eq!(span[0]["args"]["batch"], batch, "{}", span[0]);
    }
}
