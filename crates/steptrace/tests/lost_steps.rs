//! A window whose steps never reached the file is an error that says so, never a file that is
//! silently missing. A thread is bound to the Chrome layer built on it last (as tracing-chrome
//! binds it): a profiler built earlier on that thread and stepped there loses every span.

use steptrace::{Profiler, Schedule};
use tracing_subscriber::prelude::*;

#[test]
fn a_window_whose_steps_never_reached_the_file_is_an_error() {
    let schedule: Schedule = "active=2,repeat=1".parse().unwrap();
    let (first, second) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (first_dir, second_dir) = (first.path().to_owned(), second.path().to_owned());
    let (results, lost, other) = std::thread::spawn(move || {
        let (layer, mut profiler) = Profiler::builder(schedule).out_dir(&first_dir).build().unwrap();
        // Built after it on the same thread: the thread now writes for this one.
        let (_other_layer, other) =
            Profiler::builder(schedule).out_dir(&second_dir).build::<tracing_subscriber::Registry>().unwrap();
        let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
        tracing::dispatcher::with_default(&dispatch, || {
            profiler.start();
            for _ in 0..3 {
                drop(tracing::info_span!(target: "steptrace", "forward").entered());
                profiler.step();
            }
            let lost = profiler.lost_events();
            (profiler.finish_all(), lost, other.finish_all())
        })
    })
    .join()
    .unwrap();
    assert!(lost > 0, "the profiler's events were lost on a thread bound to another");
    assert!(other.is_empty(), "the other profiler recorded nothing: {other:?}");
    assert_eq!(results.len(), 1, "{results:?}");
    let text = results[0].as_ref().expect_err("a cycle whose steps were all lost").to_string();
    assert!(text.contains("none of the window's steps [0, 1] reached the file"), "{text}");
    // The partial file is kept for a look, and named.
    assert!(text.contains(".partial"), "{text}");
    assert!(std::fs::read_dir(first.path())
        .unwrap()
        .flatten()
        .any(|e| e.file_name().to_string_lossy().ends_with(".partial")));
}
