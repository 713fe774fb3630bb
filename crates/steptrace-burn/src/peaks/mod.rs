//! A device's measured limits ("peaks"): what its memory moves and its arithmetic computes
//! per second at best, and what an empty kernel launch costs, measured with the backend's
//! own kernels, so that a report can price every kernel's minimum work (bytes, FLOPs)
//! against them: the roofline floor.
//!
//! # What is measured
//!
//! On the selected backend (CUDA, wgpu or the CPU, chosen as for a run: [`crate::backend`]):
//!
//! | figure | kernel | counted |
//! |---|---|---|
//! | `read` | burn's `sum` over one buffer far larger than the caches (row sums, `sum_dim`, where the full `sum` gives a wrong total: lavapipe) | the buffer's bytes |
//! | `write` | burn's `full`: a fill of one buffer | the buffer's bytes |
//! | `copy` | burn's `neg`: every element read once and written once | both: twice the buffer |
//! | `flops` | a square matmul of `f32`; on CUDA also `f16` and `bf16` (tensor cores) | 2·n³ |
//! | `launch_us` | a one-element cubecl kernel launched many times, then one sync (on the CPU backend: a one-element burn op) | µs per launch |
//!
//! Each figure runs its kernel a few times untimed first (compilation, autotune, the memory
//! pool), then keeps the best of several runs, each timed from a device sync to a device
//! sync, with the spread of the runs and a `method` string that says the kernel, the size,
//! the runs and what is timed. Outputs stay alive until their run's sync has returned, so
//! that burn's fusion neither merges the runs nor skips one; the last run's result is read
//! back and checked (a sum of ones is the element count), and a figure whose result is wrong
//! is not kept. The sizes scale with the device
//! ([`Plan`]): on a GPU, buffers of 1 GiB and a matmul of n = 8192; on a CPU (the CPU
//! backend, or wgpu on a CPU adapter such as lavapipe) a few hundred MiB at most and a small
//! matmul, so that a measurement takes seconds. A CPU's figures set
//! [`Peaks::cpu`], and every place that shows them says they are a CPU's.
//!
//! A figure that cannot be measured (a dtype the device does not run, a kernel that fails)
//! is absent, with the reason in [`Peaks::problems`]. Beside the measured figures,
//! [`published`] gives the datasheet's, for the devices steptrace knows by name (the H200
//! and H100 SXM), with their source; for any other device there is none, rather than a
//! guess.
//!
//! # The cache
//!
//! A measurement takes from seconds (a CPU) to about a minute (a GPU, with autotune), so
//! `steptrace peaks` keeps its result: one small JSON file ([`Peaks`]) per backend, device
//! and software version (burn, cubecl, wgpu or the NVIDIA driver: [`PeaksKey`]), in
//! [`default_dir`] (`$STEPTRACE_CACHE_DIR/peaks`, else `~/.cache/steptrace/peaks`), written
//! atomically. A file that cannot be used (unreadable, corrupt, of another layout version or
//! another device) is an error ([`PeaksError::is_unusable_cache`]): `steptrace peaks` warns
//! and measures again.
//!
//! A [`Session`](crate::Session) (and so `steptrace train`) never measures: when it starts
//! on a device whose peaks are cached it puts them in the run's manifest under
//! [`PEAKS`], so that every trace of the run carries them, and says on the console where
//! they came from; otherwise it says that kernels cannot be priced against the device's
//! limits until `steptrace peaks` is run for it.
//!
//! # Examples
//!
//! ```no_run
//! use steptrace_burn::backend::{select, BackendChoice};
//! use steptrace_burn::peaks::{self, PeaksCache};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let selection = select(BackendChoice::Auto)?;
//! // The cached peaks, else a measurement (stored for next time).
//! let got = peaks::obtain(&selection, &PeaksCache::default(), false)?;
//! if let Some(bandwidth) = got.peaks.bandwidth() {
//!     println!("{:.0} GB/s ({})", bandwidth / 1e9, got.path.display());
//! }
//! # Ok(())
//! # }
//! ```

mod cache;
mod error;
mod key;
mod launch;
mod measure;
mod plan;
mod published;

use std::path::PathBuf;

use burn::prelude::Device;

pub use cache::{default_dir, CachedPeaks, PeaksCache};
pub use error::PeaksError;
pub use key::{software, PeaksKey, BURN_RELEASE, CUBECL_RELEASE, WGPU_RELEASE};
pub use plan::Plan;
pub use published::published;
pub use steptrace::format::peaks::{Measured, Peaks, Published, PEAKS, PEAKS_VERSION};

use crate::backend::{catch_silently, BackendKind, Selection};

/// Measures the peaks of the selected backend's device, with the [`Plan`] for it: opens the
/// device, runs every figure, and returns them (stores nothing; see [`obtain`]).
///
/// Call [`configure_cubecl_cache`](crate::backend::configure_cubecl_cache) first to keep
/// cubecl's autotune results between measurements.
///
/// # Errors
///
/// [`PeaksError::Backend`] when the device cannot be opened, and
/// [`PeaksError::NothingMeasured`] when no figure could be measured. A figure that fails on
/// its own is absent, with its reason in [`Peaks::problems`].
pub fn measure(selection: &Selection) -> Result<Peaks, PeaksError> {
    let device = selection.device()?;
    let plan = Plan::for_selection(selection).fitted(&device);
    measure_with(selection, &device, &plan)
}

/// [`measure`] on a device already open, with a plan of the caller's ([`Plan::tiny`] in a
/// test).
///
/// # Errors
///
/// As [`measure`].
///
/// # Examples
///
/// ```
/// use steptrace_burn::backend::{select, BackendChoice};
/// use steptrace_burn::peaks::{measure_with, Plan};
///
/// let selection = select(BackendChoice::Cpu)?;
/// let peaks = measure_with(&selection, &selection.device()?, &Plan::tiny())?;
/// assert!(peaks.cpu && peaks.read.is_some());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn measure_with(selection: &Selection, device: &Device, plan: &Plan) -> Result<Peaks, PeaksError> {
    let key = PeaksKey::of(selection);
    let device = &device.clone().without_autodiff();
    let mut problems = Vec::new();
    let mut read_note = None;
    let read = figure(&mut problems, "read", &mut || {
        measure::read(device, plan).map(|(m, note)| {
            read_note = note;
            m
        })
    });
    problems.extend(read_note);
    let write =
        figure(&mut problems, "write", &mut || measure::write(device, plan, selection.kind == BackendKind::Cpu));
    let copy = figure(&mut problems, "copy", &mut || measure::copy(device, plan));
    let mut flops = std::collections::BTreeMap::new();
    for dtype in std::iter::once("f32").chain(plan.half_dtypes.iter().copied()) {
        if let Some(m) = figure(&mut problems, &format!("{dtype} matmul"), &mut || measure::matmul(device, plan, dtype))
        {
            flops.insert(dtype.to_owned(), m);
        }
    }
    let launch_us = figure(&mut problems, "launch", &mut || launch::launch(device, selection.kind, plan));
    if plan.half_dtypes.is_empty() {
        problems.push(format!(
            "f16, bf16 matmul: not measured on {}: steptrace measures them on CUDA only, where tensor cores run them",
            selection.kind
        ));
    }
    let published = published(&key.device);
    if let (Some(m), Some(p)) = (flops.get_mut("f32"), published.get("f32")) {
        if m.value > p.value {
            m.method.push_str(
                "; faster than the datasheet's FP32 figure without tensor cores: the matmul ran on tensor cores (TF32)",
            );
        }
    }
    if read.is_none() && write.is_none() && copy.is_none() && flops.is_empty() && launch_us.is_none() {
        return Err(PeaksError::NothingMeasured { device: key.device, problems: problems.join("; ") });
    }
    Ok(Peaks {
        version: PEAKS_VERSION,
        device: key.device,
        backend: selection.kind.as_str().to_owned(),
        software: key.software,
        measured_at: measure::now_rfc3339(),
        read,
        write,
        copy,
        flops,
        launch_us,
        published,
        problems,
        cpu: key.cpu,
    })
}

/// One figure, measured by `run`: absent, with the reason in `problems`, when it fails or
/// its kernel panics.
fn figure(
    problems: &mut Vec<String>,
    what: &str,
    run: &mut dyn FnMut() -> Result<Measured, String>,
) -> Option<Measured> {
    match catch_silently(run) {
        Ok(Ok(m)) => Some(m),
        Ok(Err(why)) => {
            problems.push(format!("{what}: {why}"));
            None
        }
        Err(panic) => {
            problems.push(format!("{what}: the kernel failed: {panic}"));
            None
        }
    }
}

/// The peaks cached for the selected device in the default cache ([`default_dir`]);
/// `Ok(None)` when none are. Never measures.
///
/// # Errors
///
/// A cache file that exists and cannot be used ([`PeaksError::is_unusable_cache`]).
pub fn cached(selection: &Selection) -> Result<Option<CachedPeaks>, PeaksError> {
    PeaksCache::default().load(&PeaksKey::of(selection))
}

/// What [`obtain`] found or measured.
#[derive(Debug)]
#[non_exhaustive]
pub struct Obtained {
    /// The peaks.
    pub peaks: Peaks,
    /// The cache file they came from, or were written to (or would have been).
    pub path: PathBuf,
    /// Whether they came from the cache (else they were measured now).
    pub from_cache: bool,
    /// Why a cache file that exists was not used (measured again instead).
    pub unusable_cache: Option<PeaksError>,
    /// Why the new measurement could not be stored.
    pub not_stored: Option<PeaksError>,
}

/// The peaks of the selected device: from `cache` when a file fits and `remeasure` is
/// false, else measured now ([`measure`]) and stored in `cache`.
///
/// A cache file that cannot be used is no error: it is measured again, and
/// [`Obtained::unusable_cache`] says why; nor is a measurement that cannot be stored
/// ([`Obtained::not_stored`]).
///
/// # Errors
///
/// As [`measure`].
pub fn obtain(selection: &Selection, cache: &PeaksCache, remeasure: bool) -> Result<Obtained, PeaksError> {
    let key = PeaksKey::of(selection);
    let mut unusable_cache = None;
    if !remeasure {
        match cache.load(&key) {
            Ok(Some(found)) => {
                return Ok(Obtained {
                    peaks: found.peaks,
                    path: found.path,
                    from_cache: true,
                    unusable_cache,
                    not_stored: None,
                })
            }
            Ok(None) => {}
            Err(e) => unusable_cache = Some(e),
        }
    }
    let peaks = measure(selection)?;
    let (path, not_stored) = match cache.store(&key, &peaks) {
        Ok(path) => (path, None),
        Err(e) => (cache.path(&key), Some(e)),
    };
    Ok(Obtained { peaks, path, from_cache: false, unusable_cache, not_stored })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::{select, BackendChoice};

    /// Every figure of a tiny plan, on the CPU backend and on wgpu (lavapipe here): positive,
    /// finite, with its method; and nothing of a CPU passes for a GPU's.
    #[test]
    fn tiny_measurements_are_positive_and_say_how() {
        let _turn = crate::backend::DEVICE_TESTS.lock().unwrap_or_else(|e| e.into_inner());
        let mut choices = vec![BackendChoice::Cpu];
        if select(BackendChoice::Wgpu).is_ok() {
            choices.push(BackendChoice::Wgpu);
        }
        for choice in choices {
            let Ok(selection) = select(choice) else { continue };
            let device = selection.device().expect("device");
            let peaks = measure_with(&selection, &device, &Plan::tiny()).expect("measured");
            eprintln!("{}", serde_json::to_string_pretty(&peaks).unwrap_or_default());
            for (name, m) in
                [("read", &peaks.read), ("write", &peaks.write), ("copy", &peaks.copy), ("launch", &peaks.launch_us)]
            {
                let m = m.as_ref().unwrap_or_else(|| panic!("{choice}: {name} missing: {:?}", peaks.problems));
                assert!(m.value.is_finite() && m.value > 0.0 && m.spread >= 0.0, "{choice} {name}: {m:?}");
                assert!(m.method.contains("best of 2 runs after 1 untimed"), "{choice} {name}: {}", m.method);
            }
            let f32 = &peaks.flops["f32"];
            assert!(f32.value.is_finite() && f32.value > 0.0, "{f32:?}");
            assert_eq!(peaks.cpu, !selection.is_gpu());
            assert_eq!(peaks.backend, selection.kind.as_str());
            assert!(
                peaks.problems.iter().any(|p| p.starts_with("f16, bf16 matmul: not measured")),
                "{:?}",
                peaks.problems
            );
            assert!(peaks.bandwidth().is_some() && peaks.throughput("bf16").is_some());
        }
    }
}
