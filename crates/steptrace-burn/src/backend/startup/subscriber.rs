//! Installing a profiler so that the startup can be read: [`install_profiler`].

use steptrace::{Error, Profiler, ProfilerBuilder};
use tracing_subscriber::layer::SubscriberExt;

use super::capture::install_log_capture;

/// Builds `builder`'s profiler and installs it as the process's global subscriber, as
/// [`ProfilerBuilder::try_install`] does, with steptrace's `log` logger in place of
/// tracing-log's `LogTracer`: `log` records reach the trace as before, and
/// [`Session`](crate::Session) can read cubecl's records to itemise the start
/// ([`StartupCapture`](super::StartupCapture)).
///
/// Use it instead of `try_install` in a program that calls [`Session`](crate::Session): `log`
/// allows one logger per process, and `try_install` takes the slot for `LogTracer`.
///
/// # Errors
///
/// When the profiler cannot be built, or a global subscriber is already set. That the
/// `log` slot is taken is not an error: the start is then not itemised, and the manifest
/// says why.
///
/// # Examples
///
/// ```no_run
/// # fn docs() -> Result<(), steptrace::Error> {
/// use steptrace::Profiler;
/// let builder = Profiler::builder("wait=1,warmup=1,active=3".parse()?).out_dir("traces");
/// let profiler = steptrace_burn::backend::install_profiler(builder)?;
/// # drop(profiler);
/// # Ok(())
/// # }
/// ```
pub fn install_profiler(builder: ProfilerBuilder) -> Result<Profiler, Error> {
    // NVTX ranges mirror steptrace's spans in every step, not only in recorded ones, while a
    // tool is there to see them.
    #[cfg(feature = "nvtx")]
    let nvtx = crate::nvtx::tool_attached();
    #[cfg(feature = "nvtx")]
    let builder = if nvtx { builder.own_spans_in_every_step() } else { builder };
    let (layer, profiler) = builder.build_global::<tracing_subscriber::Registry>()?;
    let subscriber = tracing_subscriber::registry().with(layer);
    // Stamps steptrace's spans, so that kernels are tied to the spans their ops were called in.
    #[cfg(feature = "attribution")]
    let subscriber = subscriber.with(crate::attribute::StampLayer);
    // Mirrors steptrace's spans as NVTX ranges for Nsight.
    #[cfg(feature = "nvtx")]
    let subscriber = subscriber.with(nvtx.then_some(crate::NvtxLayer));
    tracing::subscriber::set_global_default(subscriber).map_err(|e| Error::Install(e.to_string()))?;
    // steptrace's own spans around tracing, except while kernel attribution stamps them.
    profiler.record_own_spans_directly(crate::DIRECT_VETO);
    // Mirrors `try_init`, which would install LogTracer now; a slot already taken is
    // reported by the run's manifest.
    let _ = install_log_capture();
    Ok(profiler)
}
