//! A program's own model and loop, profiled through `steptrace_burn::Session` on the CPU
//! backend: what the trace holds, a failure the program reports, and a signal. Each session
//! runs under a scoped subscriber (`Profiling::Installed`), so that several share this binary.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use burn::nn::loss::CrossEntropyLossConfig;
use burn::nn::{Linear, LinearConfig, Relu};
use burn::optim::AdamConfig;
use burn::prelude::*;
use steptrace::reader::{read_trace_file, Trace};
use steptrace::{Profiler, SavedTrace};
use steptrace_burn::backend::BackendChoice;
use steptrace_burn::signals::Signals;
use steptrace_burn::{Console, Error, Profiling, Session, SessionBuilder, SignalHandling, StepError};

/// burn's backends keep one process-wide seed each, and attribution one recorder: sessions
/// take turns.
static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[derive(Module, Debug)]
struct Net {
    hidden: Linear,
    out: Linear,
    relu: Relu,
}

impl Net {
    fn new(device: &Device) -> Net {
        Net {
            hidden: LinearConfig::new(8, 16).init(device),
            out: LinearConfig::new(16, 3).init(device),
            relu: Relu::new(),
        }
    }

    fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        self.out.forward(self.relu.forward(self.hidden.forward(x)))
    }
}

fn batch(k: u64) -> (TensorData, TensorData) {
    let x: Vec<f32> = (0..12 * 8).map(|i| ((i as u64 * 31 + k * 7) % 17) as f32 / 17.0).collect();
    let y: Vec<i64> = (0..12).map(|i| ((i as u64 + k) % 3) as i64).collect();
    (TensorData::new(x, [12, 8]), TensorData::new(y, [12]))
}

/// A session on the CPU writing into `out`, its profiler under a scoped subscriber.
fn builder(out: &Path, schedule: &str) -> (SessionBuilder, tracing::Dispatch) {
    let (layer, profiler): (_, Profiler) =
        Profiler::builder(schedule.parse().unwrap()).out_dir(out).worker("own").build().expect("profiler");
    let dispatch = {
        use tracing_subscriber::prelude::*;
        tracing::Dispatch::new(tracing_subscriber::registry().with(layer))
    };
    let b = Session::builder()
        .backend(BackendChoice::Cpu)
        .console(Console::Off)
        .signals(SignalHandling::Off)
        .profiling(Profiling::Installed(profiler));
    (b, dispatch)
}

/// Trains `steps` steps of the plain loop; `stop_after` sets the stop flag after that step.
fn train(session: &mut Session, steps: u64, stop: Option<(&AtomicUsize, u64)>) -> Result<(), Error> {
    let device = session.device();
    let mut model = Net::new(&device);
    let mut optim = AdamConfig::new().init();
    let loss_fn = CrossEntropyLossConfig::new().init(&device);
    session.watch(&model);
    let mut data = (0..steps).map(batch);
    while let Some((x, y)) = session.load(|| data.next())? {
        let (x, y) = session
            .copy((x, y), |(x, y)| (Tensor::<2>::from_data(x, &device), Tensor::<1, Int>::from_data(y, &device)))?;
        let logits = session.forward(|| model.forward(x))?;
        let loss = session.loss(|| loss_fn.forward(logits, y))?;
        let grads = session.backward(|| loss.backward())?;
        model = session.optimize(&mut optim, 1e-2, model, grads)?;
        if let Some((flag, at)) = stop {
            if session.step_num() == at {
                flag.store(2, Ordering::SeqCst);
            }
        }
        session.step()?;
    }
    Ok(())
}

fn names(trace: &Trace) -> Vec<&str> {
    trace.events.iter().map(|e| e.name.as_str()).collect()
}

#[test]
fn a_plain_loop_gets_its_spans_step_times_and_manifest() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let (b, dispatch) = builder(dir.path(), "wait=1,warmup=1,active=2,repeat=1");
    let summary = tracing::dispatcher::with_default(&dispatch, || {
        let mut session = b.steps(6).start().expect("session");
        train(&mut session, 6, None).expect("trains");
        session.finish().expect("finish")
    });
    assert_eq!(summary.steps.len(), 6);
    assert!(summary.steps.iter().all(|s| s.ms > 0.0 && s.samples == 12), "{:?}", summary.steps);
    // A step's loss is what the program read: none here.
    assert!(summary.steps.iter().all(|s| s.loss.is_none()));
    assert_eq!((summary.startup_steps, summary.batch_size, summary.parameters), (1, 12, 8 * 16 + 16 + 16 * 3 + 3));
    let saved: &[SavedTrace] = &summary.traces;
    assert_eq!(saved.len(), 1);
    assert_eq!(saved[0].steps, vec![2, 3]);
    let trace = read_trace_file(&saved[0].path).unwrap();
    let names = names(&trace);
    for span in ["data.load", "transfer.h2d", "forward", "loss", "backward", "optimizer", "sync"] {
        assert!(names.contains(&span), "{span} missing: {names:?}");
    }
    // The session wraps no span of its own around a step's parts: the step is ProfilerStep#N.
    assert!(!names.contains(&"train.step"), "{names:?}");
    // The steps recorded are the schedule's, each whole: its ProfilerStep span ends where the
    // next begins.
    let steps: Vec<u64> = trace.events.iter().filter_map(|e| steptrace::format::names::step_number(&e.name)).collect();
    assert!(steps.contains(&2) && steps.contains(&3), "{steps:?}");
    let h2d = trace.events.iter().find(|e| e.name == "transfer.h2d").unwrap();
    // 12 x 8 f32 inputs, 12 targets at the CPU backend's i32 width.
    assert_eq!(h2d.arg("input_bytes").and_then(|v| v.as_str()), Some("384"));
    assert_eq!(h2d.arg("target_bytes").and_then(|v| v.as_str()), Some("48"));
    let manifest = &trace.metadata["metadata"]["manifest"];
    assert_eq!(manifest["startup_steps"], 1);
    assert_eq!(manifest["steps"], 6);
    assert_eq!(manifest["batch_size"], 12);
    assert_eq!(manifest["input_shape"], serde_json::json!([12, 8]));
    assert_eq!(manifest["backend_kind"], "cpu");
    assert_eq!(manifest["sync_policy"], "step");
}

#[test]
fn a_failure_of_the_programs_saves_the_cycle_and_ends_the_session() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let (b, dispatch) = builder(dir.path(), "wait=0,warmup=1,active=4,repeat=1");
    tracing::dispatcher::with_default(&dispatch, || {
        let mut session = b.start().expect("session");
        train(&mut session, 3, None).expect("trains");
        // Step 3 is recording when the program gives up on it.
        let err = session.fail_step("the batch file is corrupt");
        let Error::StepFailed(failure) = err else { panic!("{err}") };
        assert_eq!(failure.step, 3);
        assert_eq!(failure.cause, StepError::Program { message: "the batch file is corrupt".into() });
        assert!(failure.out_of_memory.is_none());
        assert_eq!(failure.traces.len(), 1, "{failure:?}");
        assert!(failure.traces[0].partial);
        let trace = read_trace_file(&failure.traces[0].path).unwrap();
        let manifest = &trace.metadata["metadata"]["manifest"];
        assert!(manifest["notes"].to_string().contains("step 3 failed: the batch file is corrupt"), "{manifest}");
        // Nothing goes on after a failure.
        assert!(matches!(session.load(|| 1), Err(Error::Ended(_))));
        assert!(matches!(session.step(), Err(Error::Ended(_))));
        assert!(matches!(session.finish(), Err(Error::Ended(_))));
    });
}

#[test]
fn a_panic_in_a_phase_is_a_step_failure_not_a_crash() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let (b, dispatch) = builder(dir.path(), "wait=0,warmup=0,active=3,repeat=1");
    tracing::dispatcher::with_default(&dispatch, || {
        let mut session = b.start().expect("session");
        let device = session.device();
        let x = session.copy(batch(0).0, |x| Tensor::<2>::from_data(x, &device)).expect("copy");
        // A shape error inside burn panics; the session returns it as the step's failure.
        let wrong = Tensor::<2>::zeros([3, 3], &device);
        let err = session.forward(|| x.matmul(wrong)).expect_err("a shape error");
        let Error::StepFailed(failure) = err else { panic!("{err}") };
        assert_eq!(failure.step, 0);
        assert!(matches!(&failure.cause, StepError::Panicked { .. }), "{}", failure.cause);
        assert!(failure.traces.iter().all(|t| t.partial), "{failure:?}");
    });
}

#[test]
fn a_signal_ends_the_run_after_its_step_with_the_cycle_saved() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let (b, dispatch) = builder(dir.path(), "wait=0,warmup=1,active=5,repeat=1");
    let flag = Arc::new(AtomicUsize::new(0));
    let b = b.signals(SignalHandling::Given(Signals::from_flag(flag.clone())));
    let err = tracing::dispatcher::with_default(&dispatch, || {
        let mut session = b.start().expect("session");
        train(&mut session, 20, Some((&flag, 3))).expect_err("interrupted")
    });
    assert_eq!(err.exit_code(), 130);
    let Error::Interrupted { signal, summary } = err else { panic!("{err}") };
    assert_eq!(signal, 2);
    assert_eq!(summary.steps.len(), 4, "steps 0 to 3 ran");
    assert_eq!(summary.interrupted.as_deref(), Some("interrupted (SIGINT) after step 3"));
    assert_eq!(summary.traces.len(), 1);
    assert!(summary.traces[0].partial);
    assert_eq!(summary.traces[0].steps, vec![1, 2, 3]);
}
