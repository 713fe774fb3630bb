//! After an out-of-memory (with `--memory`): the bytes a sample really needs, measured by
//! training a fresh model for two steps at two smaller batches, and the batch that would fit.
//!
//! Before each of the two runs the pools give their free pages back (`memory_cleanup`), so that
//! what they reserve after the run is what that batch needed at its peak, with the pools' own
//! overhead: the device must hold exactly that. Parameters, gradients and optimizer state are
//! the same at both batches, so the difference of the two reservations over the difference of
//! the batches is what one more sample costs. The runs happen after the failed step's cycle
//! was saved, under a subscriber of their own: nothing of them reaches a trace. They run on a
//! thread of their own that the run waits for at most [`LIMIT`], and no longer than until a
//! signal asks the run to stop: a measurement that hangs (a device thread that died) is left
//! behind, and the run ends with what the failure alone says.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use burn::optim::AdamConfig;
use burn::prelude::{Device, TensorData};

use steptrace_burn::data::{BatchSource, HostBatch};
use steptrace_burn::failure::oom::{Bounded, Probe, ProbePoint, Shortage};

use crate::step::{self, StepModel};

/// How long the run waits for the measurement: each batch size is new to cubecl's autotune,
/// which takes a minute or two on a cold CUDA cache.
pub(crate) const LIMIT: Duration = Duration::from_secs(300);

/// Makes a fresh model of the run's configuration, on any thread.
pub(crate) type Rebuild<M> = Arc<dyn Fn() -> M + Send + Sync>;

/// [`measure`] on a thread of its own, waited for at most [`LIMIT`] and until `stop` (the run's
/// signal flag) is set; `Some` with the reason when it was given up.
pub(crate) fn measure_in_time<M: StepModel + 'static>(
    rebuild: Rebuild<M>,
    source: Arc<dyn BatchSource>,
    device: Device,
    learning_rate: f64,
    report: &steptrace_burn::failure::oom::OutOfMemory,
    stop: Option<Arc<AtomicUsize>>,
) -> Option<Probe> {
    let (tx, rx) = mpsc::channel();
    let report_copy = report.clone();
    let spawned = std::thread::Builder::new().name("steptrace-oom-probe".into()).spawn(move || {
        let _ = tx.send(measure(rebuild.as_ref(), source.as_ref(), &device, learning_rate, &report_copy));
    });
    if let Err(e) = spawned {
        return Some(Probe { problems: vec![format!("the measurement could not start: {e}")], ..Probe::default() });
    }
    let started = Instant::now();
    loop {
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(probe) => return probe,
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Some(Probe {
                    problems: vec!["the measurement stopped without an answer".into()],
                    ..Probe::default()
                })
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        let signal = stop.as_ref().map_or(0, |s| s.load(Ordering::SeqCst));
        let why = if signal != 0 {
            format!("given up: {} asked the run to stop", steptrace_burn::signals::signal_name(signal))
        } else if started.elapsed() >= LIMIT {
            format!("given up after {} s (a device that stopped answering, or a long autotune)", LIMIT.as_secs())
        } else {
            continue;
        };
        return Some(Probe { problems: vec![why], ..Probe::default() });
    }
}

/// Trains a fresh model from `rebuild` for two steps at `batch` samples (the first `batch` of
/// the source's first batch), and reads what the pools then hold.
fn point<M: StepModel>(
    rebuild: &dyn Fn() -> M,
    source: &dyn BatchSource,
    device: &Device,
    learning_rate: f64,
    batch: u64,
) -> Result<ProbePoint, String> {
    device.memory_cleanup();
    let host = head(source.batch(0).map_err(|e| e.to_string())?, batch as usize)?;
    let mut model = rebuild();
    let mut optim = AdamConfig::new().init();
    for _ in 0..2 {
        let on_device = step::transfer(host.clone(), device).map_err(|e| e.to_string())?;
        let (next, loss) =
            step::train_batch(model, &mut optim, on_device, learning_rate, device).map_err(|e| e.to_string())?;
        model = next;
        loss.try_into_data().map_err(|e| e.to_string())?;
    }
    steptrace_burn::sync::sync(device).map_err(|e| e.to_string())?;
    let usage = steptrace_burn::backend::memory_usage(device).ok_or("the allocator did not answer")?;
    drop((model, optim));
    Ok(ProbePoint { batch, reserved: usage.bytes_reserved, in_use: usage.bytes_in_use })
}

/// The first `samples` samples of `batch`.
fn head(batch: HostBatch, samples: usize) -> Result<HostBatch, String> {
    if samples == 0 || samples > batch.samples {
        return Err(format!("cannot take {samples} of a batch of {}", batch.samples));
    }
    let cut = |data: &TensorData| {
        let mut shape = data.shape().to_vec();
        let row = data.as_bytes().len() / shape[0].max(1);
        shape[0] = samples;
        TensorData::from_bytes_vec(data.as_bytes()[..row * samples].to_vec(), shape, data.dtype())
    };
    Ok(HostBatch { index: batch.index, input: cut(&batch.input), target: cut(&batch.target), samples })
}

/// The pairs of batches to measure at, smallest first: about a 32nd of the failed batch (or of
/// the largest that fits one allocation), then an 8th, then a half. Small batches first, because
/// each new batch size is new to autotune (the larger, the longer it tunes) and a large one can
/// fail again (on CUDA a grid can grow past its limits); a larger pair is tried only when a
/// smaller one cannot resolve a sample's bytes (the pools did not grow).
///
/// The two batches of a pair are a power of two `p` and three quarters of it: cubecl files its
/// tuning results under shapes rounded up to a power of two, so both batches share one
/// autotune (the second runs on what the first tuned) and the probe pays one tuning a pair,
/// not two.
fn candidates(batch: u64, one_allocation: Option<u64>) -> Vec<[u64; 2]> {
    let top = one_allocation.map_or(batch, |b| b.min(batch));
    [32u64, 8, 2]
        .iter()
        .filter_map(|d| {
            let most = top / d;
            if most >= 4 {
                // The largest power of two at most `most`, and three quarters of it.
                let p = 1u64 << (63 - most.leading_zeros());
                Some([p / 4 * 3, p])
            } else {
                Some([top / (2 * d), most]).filter(|[a, b]| *a >= 1 && b > a)
            }
        })
        .collect()
}

/// Measures the bytes per sample and the batch that fits, after the failure `report` describes;
/// `None` when the failed batch is too small to halve.
pub(crate) fn measure<M: StepModel>(
    rebuild: &dyn Fn() -> M,
    source: &dyn BatchSource,
    device: &Device,
    learning_rate: f64,
    report: &steptrace_burn::failure::oom::OutOfMemory,
) -> Option<Probe> {
    let one_allocation =
        report.fitting_batch.known().filter(|b| b.method_note.contains("largest allocation")).map(|b| b.value);
    let mut tried = Vec::new();
    for batches in candidates(report.batch_size, one_allocation) {
        let run = |b| {
            steptrace_burn::backend::catch_silently(|| point(rebuild, source, device, learning_rate, b))
                .unwrap_or_else(|panic| Err(format!("it panicked: {panic}")))
        };
        // Nothing the runs do goes to the run's subscriber (traces, NVTX, the console).
        let points = tracing::subscriber::with_default(tracing::subscriber::NoSubscriber::default(), || {
            let low = run(batches[0])?;
            let high = run(batches[1])?;
            Ok::<_, String>([low, high])
        });
        device.memory_cleanup();
        match points {
            Ok([low, high]) if high.reserved <= low.reserved => tried.push(format!(
                "batches {} and {}: the pools reserved {} B at both, too close to resolve a sample's bytes",
                low.batch, high.batch, high.reserved
            )),
            Ok(points) => return Some(conclude(points, report, tried)),
            // A larger pair would fail as well, and take longer to.
            Err(why) => {
                tried.push(format!(
                    "batches {} and {}: {}",
                    batches[0],
                    batches[1],
                    steptrace_burn::failure::oom::brief(&why)
                ));
                break;
            }
        }
    }
    (!tried.is_empty()).then(|| Probe { problems: tried, ..Probe::default() })
}

/// The bytes per sample from two points, and the batch that fits the memory the pools could
/// have: the device's capacity, or less where the failure showed less (the pools held
/// `reserved` when a request of `requested` could not be added).
pub(crate) fn conclude(
    points: [ProbePoint; 2],
    report: &steptrace_burn::failure::oom::OutOfMemory,
    failed: Vec<String>,
) -> Probe {
    let [low, high] = points;
    let mut probe = Probe { points: points.to_vec(), problems: failed, ..Probe::default() };
    let grew = high.reserved.saturating_sub(low.reserved);
    if grew == 0 {
        report_unknown(
            &mut probe,
            "the pools reserved no more at the larger batch: the step's memory did not grow with it",
        );
        return probe;
    }
    let per_sample = grew.div_ceil(high.batch - low.batch);
    let capacity = report.limits.and_then(|l| l.capacity);
    let seen = match (report.shortage, report.at_failure, report.requested_bytes) {
        (Shortage::DeviceFull, Some(m), Some(r)) => Some(m.bytes_reserved.saturating_add(r)),
        _ => None,
    };
    let (usable, usable_note) = match (capacity, seen) {
        (Some(c), Some(s)) if s < c => (
            s,
            format!(
                "the {s} B the pools could not grow past (they held {} B when the request failed)",
                s - report.requested_bytes.unwrap_or(0)
            ),
        ),
        (Some(c), _) => (c, format!("the device's {c} B")),
        (None, Some(s)) => (s, format!("the {s} B the pools could not grow past")),
        (None, None) => {
            probe.per_sample = Some(Bounded { value: per_sample, bound: "about", method_note: note(&probe) });
            report_unknown(&mut probe, "the device's capacity is not known (its runtime states none)");
            return probe;
        }
    };
    probe.per_sample = Some(Bounded { value: per_sample, bound: "about", method_note: note(&probe) });
    let mut fits = if usable > high.reserved { high.batch + (usable - high.reserved) / per_sample } else { high.batch };
    let mut fit_note =
        format!("{} samples measured, plus what {usable_note} leaves over {per_sample} B per sample", high.batch);
    if let Some(b) = report.fitting_batch.known().filter(|b| b.method_note.contains("largest allocation")) {
        if b.value < fits {
            fits = b.value;
            fit_note = format!("{}; less where one allocation bounds it: {}", fit_note, b.method_note);
        }
    }
    probe.fitting_batch = Some(Bounded { value: fits, bound: "about", method_note: fit_note });
    probe
}

fn note(probe: &Probe) -> String {
    let p: Vec<String> =
        probe.points.iter().map(|p| format!("{} B reserved at batch {}", p.reserved, p.batch)).collect();
    format!(
        "measured: a fresh model trained two steps at each of two batches, the pools emptied before each; {}: the difference over the batches' difference (pool overhead included)",
        p.join(" and ")
    )
}

fn report_unknown(probe: &mut Probe, why: &str) {
    probe.problems.push(why.to_owned());
}

#[cfg(test)]
mod tests {
    use super::*;
    use steptrace_burn::backend::{MemoryLimits, MemorySnapshot};
    use steptrace_burn::failure::oom::{Estimate, OutOfMemory};

    fn report(shortage: Shortage) -> OutOfMemory {
        OutOfMemory {
            step: 0,
            shortage,
            requested_bytes: Some(400),
            batch_size: 64,
            reached_phase: None,
            phases_observed: true,
            surfaced_at: "",
            limits: Some(MemoryLimits { capacity: Some(10_000), max_allocation: 1_000 }),
            at_failure: Some(MemorySnapshot { bytes_reserved: 5_000, ..MemorySnapshot::default() }),
            categories: Vec::new(),
            largest: Vec::new(),
            per_sample: Estimate::NotKnown { not_known: String::new() },
            fitting_batch: Estimate::NotKnown { not_known: String::new() },
            not_observed: Vec::new(),
            probe: None,
            failure_bounds: None,
        }
    }

    #[test]
    fn candidates_go_from_small_fractions_of_the_batch_or_the_one_allocation_bound_up() {
        assert_eq!(candidates(8192, None), [[192, 256], [768, 1024], [3072, 4096]]);
        assert_eq!(candidates(8192, Some(256)), [[6, 8], [24, 32], [96, 128]]);
        // Not a power of two: the largest power of two below each fraction.
        assert_eq!(candidates(10_000, None), [[192, 256], [768, 1024], [3072, 4096]]);
        assert_eq!(candidates(40, None), [[3, 4], [12, 16]], "pairs of less than one sample are left out");
        assert_eq!(candidates(3, None), Vec::<[u64; 2]>::new());
        // Both batches of a pair round up to the same power of two, as cubecl's tuning keys do.
        for [a, b] in candidates(12_345, None) {
            assert_eq!(a.next_power_of_two(), b.next_power_of_two(), "{a} and {b}");
        }
    }

    /// The slope of the two reservations is the bytes per sample; the usable memory is what the
    /// failure showed, when it is less than the capacity.
    #[test]
    fn two_points_give_bytes_per_sample_and_the_fitting_batch() {
        let points = [
            ProbePoint { batch: 16, reserved: 1_000, in_use: 0 },
            ProbePoint { batch: 32, reserved: 1_800, in_use: 0 },
        ];
        let p = conclude(points, &report(Shortage::DeviceFull), Vec::new());
        // (1,800 − 1,000) / 16 = 50 B a sample; usable = 5,000 held + 400 asked = 5,400.
        assert_eq!(p.per_sample.as_ref().unwrap().value, 50);
        // 32 + (5,400 − 1,800) / 50 = 104.
        assert_eq!(p.fitting_batch.as_ref().unwrap().value, 104);
        // Too large for one allocation: the capacity, then the one-allocation bound.
        let mut r = report(Shortage::TooLargeForOneAllocation);
        r.fitting_batch = Estimate::Known(Bounded {
            value: 90,
            bound: "at most",
            method_note: "against the largest allocation".into(),
        });
        let p = conclude(points, &r, Vec::new());
        assert_eq!(p.fitting_batch.as_ref().unwrap().value, 90, "(10,000 − 1,800) / 50 + 32 = 196, bounded by 90");
        let flat = [points[0], ProbePoint { batch: 32, reserved: 1_000, in_use: 0 }];
        let p = conclude(flat, &r, Vec::new());
        assert!(p.fitting_batch.is_none() && p.problems[0].contains("did not grow"));
    }
}
