//! steptrace's own spans on the stepping thread, kept without tracing's registry: [`own_span!`]
//! and [`layer`](crate::layer).
//!
//! A `tracing` span costs its registry slot, the dispatcher's walk through every layer, and
//! the gate's lookups of the span it is told about, on each begin and end. Inside a
//! launch-bound training step, whose work between two spans evicts the caches, that is most
//! of what recording costs (`docs/benchmarks.md`, the `step` bench). When nobody but steptrace
//! can see steptrace's own spans, which is the case once a profiler's global gate is the
//! process's subscriber and no other layer mirrors them, a span of the thread that runs the
//! steps is kept as two records in that thread's buffer (see `batch`), exactly the lines the
//! gate would have kept for it.
//!
//! [`Profiler::record_own_spans_directly`](crate::Profiler::record_own_spans_directly) turns
//! this on; elsewhere, on another thread, or while its veto says a layer needs the spans, a
//! span is a `tracing` span as before. Inside a direct span, `tracing::Span::current()` is the
//! span around it that went through tracing (the step's), and a layer added to the
//! subscriber later does not see it: hence the switch.

use std::borrow::Cow;
use std::sync::{Arc, OnceLock};

use tracing::span::EnteredSpan;
use tracing_core::Metadata;

use super::batch::{NameSource, Ph};
use super::gate::Shared;
use super::threads::thread_id;
use crate::format::names::LAYER_NAME_CHARS;

/// The profiler whose gate keeps direct spans, and what may veto them.
struct Direct {
    shared: Arc<Shared>,
    /// Returns true while another layer needs steptrace's spans (kernel attribution's stamps).
    veto: Option<fn() -> bool>,
}

/// One per process, as the global subscriber is.
static DIRECT: OnceLock<Direct> = OnceLock::new();

/// Turns direct spans on for the profiler sharing `shared`; false when another profiler has.
pub(crate) fn enable(shared: Arc<Shared>, veto: Option<fn() -> bool>) -> bool {
    DIRECT.set(Direct { shared, veto }).is_ok()
}

/// A span of steptrace's own, begun directly, through `tracing`, or not at all (outside a
/// window); it ends when dropped. Made by [`own_span!`] and [`layer`](crate::layer).
#[must_use = "the span ends when this guard is dropped"]
pub struct OwnSpan<'a>(Inner<'a>);

enum Inner<'a> {
    /// Kept as records: its begin was recorded into `segment`.
    Direct { meta: &'static Metadata<'static>, name: Option<Cow<'a, str>>, segment: u64 },
    /// Through tracing, as any span.
    Span(#[allow(dead_code)] EnteredSpan),
    /// Made in no window of a direct profiler: nothing to keep.
    Off,
}

impl std::fmt::Debug for OwnSpan<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let how = match &self.0 {
            Inner::Direct { .. } => "direct",
            Inner::Span(_) => "span",
            Inner::Off => "off",
        };
        f.debug_tuple("OwnSpan").field(&how).finish()
    }
}

/// What a direct span would be kept as, now, on this thread.
enum Route {
    /// Recorded into the open segment.
    Keep(&'static Direct, u64),
    /// Not made: a wait or skip step, or a finished profiler (the gate would reject it).
    Off,
    /// Through tracing.
    Tracing,
}

#[inline]
fn route(meta: &'static Metadata<'static>) -> Route {
    let Some(direct) = DIRECT.get() else { return Route::Tracing };
    let shared = &direct.shared;
    if direct.veto.is_some_and(|veto| veto()) {
        return Route::Tracing;
    }
    let segment = shared.open_segment();
    if segment == 0 {
        // Outside a window the global gate makes no span of steptrace's (no other layer
        // wants them, or this path would be off).
        // A finished profiler leaves the spans to tracing again (a later profiler may be
        // scoped to a thread).
        return if shared.collecting() || shared.finished() { Route::Tracing } else { Route::Off };
    }
    if !shared.batches.is_stepping(thread_id()) {
        return Route::Tracing;
    }
    if shared.left_out(meta) {
        return Route::Off;
    }
    Route::Keep(direct, segment)
}

impl<'a> OwnSpan<'a> {
    /// Begins the span `meta` (of steptrace's target, without fields), or calls `span` for a
    /// `tracing` span of the same name where the direct path does not apply. Use [`own_span!`].
    #[doc(hidden)]
    #[inline]
    pub fn begin(meta: &'static Metadata<'static>, span: impl FnOnce() -> EnteredSpan) -> OwnSpan<'static> {
        match route(meta) {
            Route::Keep(direct, segment) => {
                direct.keep(segment, meta, None, Ph::Begin);
                OwnSpan(Inner::Direct { meta, name: None, segment })
            }
            Route::Off => OwnSpan(Inner::Off),
            Route::Tracing => OwnSpan(Inner::Span(span())),
        }
    }

    /// Begins a layer span named `name` (cut as the gate cuts it); see [`layer`](crate::layer).
    pub(crate) fn layer(name: &'a str, meta: &'static Metadata<'static>, span: impl FnOnce() -> EnteredSpan) -> OwnSpan<'a> {
        match route(meta) {
            Route::Keep(direct, segment) => {
                let name = layer_name(name);
                direct.keep(segment, meta, name.as_deref(), Ph::Begin);
                OwnSpan(Inner::Direct { meta, name, segment })
            }
            Route::Off => OwnSpan(Inner::Off),
            Route::Tracing => OwnSpan(Inner::Span(span())),
        }
    }

    /// Whether this span went around tracing (for tests).
    #[doc(hidden)]
    pub fn is_direct(&self) -> bool {
        matches!(self.0, Inner::Direct { .. })
    }
}

impl Drop for OwnSpan<'_> {
    fn drop(&mut self) {
        let Inner::Direct { meta, name, segment } = &self.0 else { return };
        let Some(direct) = DIRECT.get() else { return };
        // An end in a later segment than its begin is dropped by the finaliser, as the gate's
        // would be; one after the window closed goes nowhere.
        let now = direct.shared.open_segment();
        if now != 0 && now == *segment {
            direct.keep(now, meta, name.as_deref(), Ph::End);
        }
    }
}

impl Direct {
    /// Keeps a begin or end in this thread's buffer. A full buffer is not handed over here
    /// (that takes the Chrome layer's announcement): it grows until the gate's next boundary
    /// on this thread, at the latest the step's end, hands it over.
    fn keep(&self, segment: u64, meta: &'static Metadata<'static>, name: Option<&str>, ph: Ph) {
        let shared = &self.shared;
        let name = name.map_or(NameSource::Static, NameSource::Text);
        shared.batches.record(shared.sink_id(), segment, thread_id(), meta, name, None, ph);
    }
}

/// A layer's name as the trace writes it: control characters dropped, at most
/// [`LAYER_NAME_CHARS`] characters; `None` when nothing visible is left (the span's own name
/// then stands).
pub(crate) fn layer_name(name: &str) -> Option<Cow<'_, str>> {
    let clean = !name.chars().any(char::is_control) && name.chars().nth(LAYER_NAME_CHARS).is_none();
    let name = if clean { Cow::Borrowed(name) } else { Cow::Owned(name.chars().filter(|c| !c.is_control()).take(LAYER_NAME_CHARS).collect()) };
    (!name.trim().is_empty()).then_some(name)
}

/// A span of steptrace's own target, without fields, named by a constant: `let _forward =
/// steptrace::own_span!(FORWARD);`. Kept directly where
/// [`Profiler::record_own_spans_directly`](crate::Profiler::record_own_spans_directly) allows
/// (see [`direct`](crate::collect::direct)), else the same as
/// `tracing::info_span!(target: "steptrace", NAME).entered()`.
#[macro_export]
macro_rules! own_span {
    ($name:expr) => {{
        static CALLSITE: $crate::collect::direct::__private::DefaultCallsite =
            $crate::collect::direct::__private::DefaultCallsite::new(&META);
        static META: $crate::collect::direct::__private::Metadata<'static> =
            $crate::collect::direct::__private::span_metadata($name, &CALLSITE);
        $crate::collect::direct::OwnSpan::begin(&META, || {
            ::tracing::info_span!(target: $crate::format::names::TARGET, $name).entered()
        })
    }};
}

#[doc(hidden)]
pub mod __private {
    pub use tracing_core::callsite::DefaultCallsite;
    pub use tracing_core::Metadata;

    use tracing_core::field::FieldSet;
    use tracing_core::metadata::Kind;
    use tracing_core::Level;

    /// The metadata of a span of steptrace's target named `name`, without fields. Its callsite
    /// is never registered: the span it describes is never given to a subscriber.
    pub const fn span_metadata(name: &'static str, callsite: &'static DefaultCallsite) -> Metadata<'static> {
        Metadata::new(
            name,
            crate::format::names::TARGET,
            Level::INFO,
            None,
            None,
            None,
            FieldSet::new(&[], tracing_core::identify_callsite!(callsite)),
            Kind::SPAN,
        )
    }
}
