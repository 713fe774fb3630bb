//! Spans around the parts of a model: [`layer`] and [`layer_span`].

use super::direct::__private::{span_metadata, DefaultCallsite, Metadata};
use super::direct::OwnSpan;
use crate::format::names::{LAYER_SPAN, TARGET};

/// Runs `f` inside a span named `name`: one line around a layer's forward, so that the trace
/// and the report's span tree show where the forward pass spends its time, layer by layer.
///
/// ```
/// let y = steptrace::layer("encoder.layer2", || 2 + 2);
/// assert_eq!(y, 4);
/// ```
///
/// In a burn model, `let x = steptrace::layer("conv1", || self.conv1.forward(x));`. The span
/// is a [`LAYER_SPAN`] of steptrace's target with `name` as a field; the trace shows it under
/// `name` (cut to [`LAYER_NAME_CHARS`](crate::format::names::LAYER_NAME_CHARS) characters).
/// Outside a recorded window the span is neither named nor written. Name layers by their
/// place in the model: the name is written into every trace that records them.
///
/// Where the profiler keeps its own spans directly
/// ([`Profiler::record_own_spans_directly`](crate::Profiler::record_own_spans_directly)), a
/// layer span of the thread that runs the steps is kept without a `tracing` span.
#[inline]
pub fn layer<T>(name: &str, f: impl FnOnce() -> T) -> T {
    let _span = layer_span(name);
    f()
}

/// [`layer`]'s span as a guard: the layer span named `name` lasts until the guard is dropped.
///
/// ```
/// let span = steptrace::layer_span("decoder");
/// let y = 2 + 2;
/// drop(span);
/// assert_eq!(y, 4);
/// ```
#[inline]
pub fn layer_span(name: &str) -> OwnSpan<'_> {
    static CALLSITE: DefaultCallsite = DefaultCallsite::new(&META);
    static META: Metadata<'static> = span_metadata(LAYER_SPAN, &CALLSITE);
    OwnSpan::layer(name, &META, || tracing::info_span!(target: TARGET, LAYER_SPAN, name).entered())
}
