//! Measuring: the timing of one figure, and the figures of memory and arithmetic.
//!
//! Every figure runs its kernel `warmup` times untimed (compilation, autotune, the memory
//! pool's first allocations), then `repeats` times, each run timed on the host from a device
//! sync before it to a device sync after it; the best run gives the figure and the worst
//! its spread. A sync drains burn's fusion queue, so the fused kernel runs inside the
//! window; every output is kept alive until the run's sync has returned (an output dropped
//! before it could be skipped), and is dropped before the next run's window opens.

use std::time::{Duration, Instant};

use burn::prelude::{Device, Tensor};
use burn::tensor::DType;
use steptrace::format::peaks::Measured;

use super::Plan;

/// The timed runs of one figure.
pub(super) struct Runs {
    warmup: usize,
    seen: usize,
    times: Vec<Duration>,
}

impl Runs {
    pub(super) fn new(warmup: usize) -> Runs {
        Runs { warmup, seen: 0, times: Vec::new() }
    }

    /// Notes one run's time (a warmup run's is not kept).
    pub(super) fn push(&mut self, took: Duration) {
        if self.seen >= self.warmup {
            self.times.push(took);
        }
        self.seen += 1;
    }

    /// The figure: `work` units per second of the best run (or, with `per`, the best
    /// run's time in µs divided by `per`), the spread `(worst - best) / best`, and the
    /// method.
    pub(super) fn figure(&self, work: f64, method: String) -> Result<Measured, String> {
        let (best, spread) = self.best()?;
        let value = work / best;
        check(value)?;
        Ok(Measured { value, spread, method })
    }

    /// The best run's time, µs, divided by `count`.
    pub(super) fn per_item_us(&self, count: usize, method: String) -> Result<Measured, String> {
        let (best, spread) = self.best()?;
        let value = best * 1e6 / count as f64;
        check(value)?;
        Ok(Measured { value, spread, method })
    }

    fn best(&self) -> Result<(f64, f64), String> {
        let secs: Vec<f64> = self.times.iter().map(Duration::as_secs_f64).collect();
        let best = secs.iter().copied().fold(f64::INFINITY, f64::min);
        let worst = secs.iter().copied().fold(0.0, f64::max);
        if secs.is_empty() || best <= 0.0 {
            return Err("no timed run took a measurable time".to_owned());
        }
        Ok((best, (worst - best) / best))
    }
}

fn check(value: f64) -> Result<(), String> {
    if value.is_finite() && value > 0.0 {
        Ok(())
    } else {
        Err(format!("the figure came out as {value}, not a positive number"))
    }
}

/// Waits for the device, a failure as text.
pub(super) fn sync(device: &Device) -> Result<(), String> {
    device.sync().map_err(|e| format!("device sync failed: {e}"))
}

/// Runs `op` between two device syncs; its time and its output.
pub(super) fn timed<K>(device: &Device, op: impl FnOnce() -> K) -> Result<(Duration, K), String> {
    sync(device)?;
    let start = Instant::now();
    let kept = op();
    sync(device)?;
    Ok((start.elapsed(), kept))
}

/// What every method string ends with: the runs and what is timed.
pub(super) fn runs_text(warmup: usize, repeats: usize) -> String {
    format!("best of {repeats} runs after {warmup} untimed, each timed from a device sync to a device sync")
}

/// `n` with thousands separators.
pub(super) fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Bytes as MiB or GiB.
fn size(bytes: u64) -> String {
    if bytes >= 1 << 30 && bytes.is_multiple_of(1 << 30) {
        format!("{} GiB", bytes >> 30)
    } else {
        format!("{} MiB", bytes >> 20)
    }
}

/// The first element of a 1-D tensor, as f64.
fn first(t: Tensor<1>) -> Result<f64, String> {
    let data = t
        .narrow(0, 0, 1)
        .cast(DType::F32)
        .try_into_data()
        .map_err(|e| format!("reading the result back failed: {e}"))?;
    data.try_to_vec::<f32>()
        .ok()
        .and_then(|v| v.first().copied())
        .map(f64::from)
        .ok_or_else(|| "the result read back empty".to_owned())
}

/// Whether a result read back is `want` (within `tolerance`, relative): the kernel ran.
fn expect(what: &str, got: f64, want: f64, tolerance: f64) -> Result<(), String> {
    if (got - want).abs() <= tolerance * want.abs().max(1.0) {
        Ok(())
    } else {
        Err(format!("{what} computed {got}, not {want}: the figure is not kept"))
    }
}

/// Read bandwidth: a full `sum` of one buffer; where the backend's full reduction does not
/// read the whole buffer (its result is wrong), row sums instead, and a note that says so.
pub(super) fn read(device: &Device, plan: &Plan) -> Result<(Measured, Option<String>), String> {
    let n = plan.elements();
    let x = Tensor::<1>::ones([n], device);
    sync(device)?;
    let mut runs = Runs::new(plan.warmup);
    let mut kept = None;
    for _ in 0..plan.warmup + plan.repeats {
        drop(kept.take());
        let (took, sum) = timed(device, || x.clone().sum())?;
        runs.push(took);
        kept = Some(sum);
    }
    drop(x);
    let got = first(kept.ok_or("no run")?)?;
    let bytes = plan.buffer_bytes;
    if expect("the sum", got, n as f64, 1e-2).is_err() {
        let note = format!(
            "read: burn's full `sum` of {} ones computed {got} on this backend, so it did not read the whole buffer: read is measured with row sums instead",
            count(n as u64)
        );
        return Ok((row_sums(device, plan)?, Some(note)));
    }
    let method = format!(
        "burn `sum` of {} f32 ({}) into one value: {} read per run; {}",
        count(n as u64),
        size(bytes),
        size(bytes),
        runs_text(plan.warmup, plan.repeats)
    );
    Ok((runs.figure(bytes as f64, method)?, None))
}

/// Read bandwidth through row sums of a matrix with rows of 4096 f32.
fn row_sums(device: &Device, plan: &Plan) -> Result<Measured, String> {
    const COLS: usize = 4096;
    let rows = (plan.elements() / COLS).max(1);
    let x = Tensor::<2>::ones([rows, COLS], device);
    sync(device)?;
    let mut runs = Runs::new(plan.warmup);
    let mut kept = None;
    for _ in 0..plan.warmup + plan.repeats {
        drop(kept.take());
        let (took, sums) = timed(device, || x.clone().sum_dim(1))?;
        runs.push(took);
        kept = Some(sums);
    }
    let sums = kept.ok_or("no run")?.reshape([rows]);
    let data = sums.try_into_data().map_err(|e| format!("reading the result back failed: {e}"))?;
    let values = data.try_to_vec::<f32>().map_err(|e| format!("reading the result back failed: {e:?}"))?;
    let wrong = values.iter().filter(|&&v| v != COLS as f32).count();
    if wrong > 0 || values.len() != rows {
        return Err(format!(
            "row sums: {wrong} of {rows} rows computed something else than {COLS}: the figure is not kept"
        ));
    }
    let bytes = (rows * COLS * 4) as u64;
    let method = format!(
        "burn `sum_dim` of a {}×{} f32 matrix ({}) into its row sums: {} read per run (the sums written not counted); {}",
        count(rows as u64),
        count(COLS as u64),
        size(bytes),
        size(bytes),
        runs_text(plan.warmup, plan.repeats)
    );
    runs.figure(bytes as f64, method)
}

/// Write bandwidth: a fill of one buffer.
pub(super) fn write(device: &Device, plan: &Plan, cpu_backend: bool) -> Result<Measured, String> {
    let n = plan.elements();
    let mut runs = Runs::new(plan.warmup);
    let mut kept: Option<Tensor<1>> = None;
    for _ in 0..plan.warmup + plan.repeats {
        drop(kept.take());
        let (took, filled) = timed(device, || Tensor::<1>::full([n], 3.0, device))?;
        runs.push(took);
        kept = Some(filled);
    }
    expect("the fill", first(kept.ok_or("no run")?)?, 3.0, 0.0)?;
    let bytes = plan.buffer_bytes;
    let note = if cpu_backend {
        " (burn-flex fills a new allocation on one thread: first-touch page faults included, as in every burn-flex op that allocates its output)"
    } else {
        ""
    };
    let method = format!(
        "burn `full` of {} f32 ({}): {} written per run{note}; {}",
        count(n as u64),
        size(bytes),
        size(bytes),
        runs_text(plan.warmup, plan.repeats)
    );
    runs.figure(bytes as f64, method)
}

/// Copy bandwidth: an elementwise op that reads one buffer and writes one, both counted.
pub(super) fn copy(device: &Device, plan: &Plan) -> Result<Measured, String> {
    let n = plan.elements();
    let mut x = Tensor::<1>::ones([n], device);
    sync(device)?;
    let mut runs = Runs::new(plan.warmup);
    let total = plan.warmup + plan.repeats;
    for _ in 0..total {
        // The tensor is moved in and the result kept: the backend may write in place (the
        // same bytes move), and nothing else holds the input.
        let (took, negated) = timed(device, move || x.neg())?;
        runs.push(took);
        x = negated;
    }
    let want = if total.is_multiple_of(2) { 1.0 } else { -1.0 };
    expect("the negation", first(x)?, want, 0.0)?;
    let bytes = plan.buffer_bytes;
    let method = format!(
        "burn `neg` of {} f32 ({}), in place where the backend reuses the buffer: {} counted per run ({} read + {} written); {}",
        count(n as u64),
        size(bytes),
        size(2 * bytes),
        size(bytes),
        size(bytes),
        runs_text(plan.warmup, plan.repeats)
    );
    runs.figure(2.0 * bytes as f64, method)
}

/// The `DType` of a dtype's name.
fn dtype(name: &str) -> Option<DType> {
    match name {
        "f32" => Some(DType::F32),
        "f16" => Some(DType::F16),
        "bf16" => Some(DType::BF16),
        _ => None,
    }
}

/// Arithmetic throughput: a square matmul in `name` (`f32`, `f16`, `bf16`).
pub(super) fn matmul(device: &Device, plan: &Plan, name: &str) -> Result<Measured, String> {
    let dt = dtype(name).ok_or_else(|| format!("{name} is not a dtype steptrace measures"))?;
    if !device.supports_dtype(dt) {
        return Err(format!("{name}: the device does not support this dtype"));
    }
    let n = plan.matmul_n;
    let a = Tensor::<2>::ones([n, n], (device, dt));
    let b = Tensor::<2>::ones([n, n], (device, dt));
    sync(device)?;
    let mut runs = Runs::new(plan.warmup.min(2));
    let mut kept: Option<Tensor<2>> = None;
    for _ in 0..plan.warmup.min(2) + plan.matmul_repeats {
        drop(kept.take());
        let (took, c) = timed(device, || a.clone().matmul(b.clone()))?;
        runs.push(took);
        kept = Some(c);
    }
    let c = kept.ok_or("no run")?;
    let corner = first(c.narrow(0, 0, 1).narrow(1, 0, 1).reshape([1]))?;
    expect("the matmul", corner, n as f64, 1e-2)?;
    let flop = 2.0 * (n as f64).powi(3);
    let method = format!(
        "burn `matmul` of two {n}×{n} {name} matrices of ones (the backend picks the kernel: cubecl by autotune, tensor cores where it takes them): 2·n³ = {} FLOP per run; {}",
        count(flop as u64),
        runs_text(plan.warmup.min(2), plan.matmul_repeats)
    );
    runs.figure(flop, method)
}

/// Now as RFC 3339, UTC, to the second (`2026-12-05T10:31:07Z`).
pub(super) fn now_rfc3339() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rest) = ((secs / 86_400) as i64, secs % 86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", rest / 3600, rest % 3600 / 60, rest % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn best_and_spread() {
        let mut runs = Runs::new(1);
        for ms in [100, 10, 20, 40] {
            runs.push(Duration::from_millis(ms));
        }
        let m = runs.figure(1.0, "m".into()).expect("figure");
        assert!((m.value - 100.0).abs() < 1e-9, "{m:?}");
        assert!((m.spread - 3.0).abs() < 1e-9, "{m:?}");
        let us = runs.per_item_us(1000, "m".into()).expect("per item");
        assert!((us.value - 10.0).abs() < 1e-9, "{us:?}");
        assert!(Runs::new(3).figure(1.0, "m".into()).is_err(), "only warmup runs: no figure");
    }

    #[test]
    fn numbers_and_dates() {
        assert_eq!(count(1_234_567), "1,234,567");
        assert_eq!(count(12), "12");
        assert_eq!(size(1 << 30), "1 GiB");
        assert_eq!(size(128 << 20), "128 MiB");
        let now = now_rfc3339();
        assert_eq!(now.len(), 20, "{now}");
        assert!(now.starts_with("20") && now.ends_with('Z') && now.as_bytes()[10] == b'T', "{now}");
    }
}
