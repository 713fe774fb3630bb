//! steptrace's own spans on the stepping thread, kept without tracing's registry:
//! [`own_span!`](crate::own_span!) and [`layer`](crate::layer).
//!
//! A `tracing` span costs its registry slot, the dispatcher's walk through every layer, and
//! the gate's lookups of the span it is told about, on each begin and end. Inside a
//! launch-bound training step, whose work between two spans evicts the caches, that is most
//! of what recording costs (`docs/benchmarks.md`, the `step` bench). When nobody but steptrace
//! can see steptrace's own spans, which is the case once a profiler's global gate is the
//! process's subscriber and no other layer mirrors them, a span of the thread that runs the
//! steps is kept as two records in that thread's buffer (see `batch`), exactly the lines the
//! gate would have kept for it: integer fields (`data.load`'s batch, `transfer.h2d`'s bytes)
//! included, written as the gate writes a `tracing` span's `args` (by the writer: the buffer
//! keeps them as numbers). So is the step's own `ProfilerStep#N` span, when the global
//! subscriber is the profiler's own (`begin_step`): a step's records reach the writer at the
//! profiler's flush, or, where they must be announced (see the `batch` module), by an event
//! sent through that subscriber to the Chrome layer.
//!
//! [`Profiler::record_own_spans_directly`](crate::Profiler::record_own_spans_directly) turns
//! this on; elsewhere, on another thread, or while its veto says a layer needs the spans, a
//! span is a `tracing` span as before. Inside a direct span, `tracing::Span::current()` is the
//! span around it that went through tracing, if any, and a layer added to the
//! subscriber later does not see it: hence the switch.

use std::borrow::Cow;
use std::sync::{Arc, OnceLock};

use tracing::span::EnteredSpan;
use tracing::Dispatch;
use tracing_core::Metadata;
use tracing_subscriber::Registry;

use super::args::{IntFields, MAX_U64_FIELDS};
use super::batch::{ArgsSource, NameSource, Ph};
use super::gate::{GateLayer, Shared, STEP_SPAN};
use super::threads::thread_id;
use crate::format::names::LAYER_NAME_CHARS;

/// The profiler whose gate keeps direct spans, and what may veto them.
struct Direct {
    shared: Arc<Shared>,
    /// Returns true while another layer needs steptrace's spans (kernel attribution's stamps).
    veto: Option<fn() -> bool>,
    /// The global subscriber, when its gate is this profiler's: a hand-over's announcement goes
    /// to its Chrome layer through it (see [`begin_step`]).
    dispatch: Option<Dispatch>,
}

/// One per process, as the global subscriber is.
static DIRECT: OnceLock<Direct> = OnceLock::new();

/// Turns direct spans on for the profiler sharing `shared`; false when another profiler has.
/// Called on the thread that installed the global subscriber, right after.
pub(crate) fn enable(shared: Arc<Shared>, veto: Option<fn() -> bool>) -> bool {
    let dispatch = tracing::dispatcher::get_default(Dispatch::clone);
    let ours = dispatch.downcast_ref::<GateLayer<Registry>>().is_some_and(|gate| gate.shares(&shared));
    DIRECT.set(Direct { shared, veto, dispatch: ours.then_some(dispatch) }).is_ok()
}

/// The metadata of a direct step span.
static STEP_META: Metadata<'static> = __private::span_metadata_with(STEP_SPAN, &["step"], &STEP_CALLSITE);
static STEP_CALLSITE: __private::DefaultCallsite = __private::DefaultCallsite::new(&STEP_META);

/// A `ProfilerStep#N` span begun directly by [`begin_step`].
#[derive(Debug)]
pub(crate) struct DirectStep {
    step: u64,
    segment: u64,
}

/// Begins the step span `ProfilerStep#step` of `shared`'s profiler as records, when direct
/// spans are on for it, its window is open and the global subscriber is its own: the begin is
/// handed to the writer at once (for the profiler's flush to take, or announced to the Chrome
/// layer through the global subscriber), as the gate hands a `tracing` step span's begin over. `None`: make a `tracing` span.
///
/// Besides the span's registry slot and the layers' visits, this skips the gate's lookups and
/// the step number's extension. Inside such a step, `tracing::Span::current()` has no
/// `ProfilerStep` around it (no layer but the gate, which does not ask, is there to see).
pub(crate) fn begin_step(shared: &Arc<Shared>, step: u64) -> Option<DirectStep> {
    let direct = DIRECT.get().filter(|d| Arc::ptr_eq(&d.shared, shared) && d.dispatch.is_some())?;
    if direct.veto.is_some_and(|veto| veto()) {
        return None;
    }
    let segment = shared.open_segment();
    if segment == 0 || !shared.bound_here() {
        return None;
    }
    shared.batches.set_stepping(thread_id());
    shared.batches.record(shared.sink_id(), segment, thread_id(), &STEP_META, NameSource::Step(step), None, Ph::Begin);
    direct.hand_over(segment, true);
    Some(DirectStep { step, segment })
}

/// Ends a step begun by [`begin_step`]; its records are handed over unless `end_waits` (the
/// next step writes to the same file and its begin takes them) and the buffer has room. An end
/// after its window closed goes nowhere, as the gate's would.
pub(crate) fn end_step(step: DirectStep, end_waits: bool) {
    let Some(direct) = DIRECT.get() else { return };
    let shared = &direct.shared;
    if shared.open_segment() != step.segment || !shared.bound_here() {
        return;
    }
    let full = shared.batches.record(
        shared.sink_id(),
        step.segment,
        thread_id(),
        &STEP_META,
        NameSource::Step(step.step),
        None,
        Ph::End,
    );
    if full || !end_waits {
        direct.hand_over(step.segment, true);
    }
}

/// A span of steptrace's own, begun directly, through `tracing`, or not at all (outside a
/// window); it ends when dropped. Made by [`own_span!`](crate::own_span!) and
/// [`layer`](crate::layer).
#[must_use = "the span ends when this guard is dropped"]
pub struct OwnSpan<'a>(Inner<'a>);

enum Inner<'a> {
    /// Kept as records: its begin was recorded into `segment`.
    Direct { meta: &'static Metadata<'static>, name: Option<Cow<'a, str>>, fields: IntFields, segment: u64 },
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
                direct.keep(segment, meta, None, IntFields::default(), Ph::Begin);
                OwnSpan(Inner::Direct { meta, name: None, fields: IntFields::default(), segment })
            }
            Route::Off => OwnSpan(Inner::Off),
            Route::Tracing => OwnSpan(Inner::Span(span())),
        }
    }

    /// [`begin`](OwnSpan::begin) for a span with integer fields (at most four), written in
    /// `args` as the gate writes a `tracing` span's. Use [`own_span!`].
    #[doc(hidden)]
    #[inline]
    pub fn begin_with(
        meta: &'static Metadata<'static>,
        fields: &[(&'static str, u64)],
        span: impl FnOnce() -> EnteredSpan,
    ) -> OwnSpan<'static> {
        match route(meta) {
            Route::Keep(direct, segment) if fields.len() <= MAX_U64_FIELDS => {
                let fields = IntFields::of(fields);
                direct.keep(segment, meta, None, fields, Ph::Begin);
                OwnSpan(Inner::Direct { meta, name: None, fields, segment })
            }
            Route::Off => OwnSpan(Inner::Off),
            Route::Keep(..) | Route::Tracing => OwnSpan(Inner::Span(span())),
        }
    }

    /// Begins a layer span named `name` (cut as the gate cuts it); see [`layer`](crate::layer).
    pub(crate) fn layer(
        name: &'a str,
        meta: &'static Metadata<'static>,
        span: impl FnOnce() -> EnteredSpan,
    ) -> OwnSpan<'a> {
        match route(meta) {
            Route::Keep(direct, segment) => {
                let name = layer_name(name);
                direct.keep(segment, meta, name.as_deref(), IntFields::default(), Ph::Begin);
                OwnSpan(Inner::Direct { meta, name, fields: IntFields::default(), segment })
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
        let Inner::Direct { meta, name, fields, segment } = &self.0 else { return };
        let Some(direct) = DIRECT.get() else { return };
        // An end in a later segment than its begin is dropped by the finaliser, as the gate's
        // would be; one after the window closed goes nowhere.
        let now = direct.shared.open_segment();
        if now != 0 && now == *segment {
            direct.keep(now, meta, name.as_deref(), *fields, Ph::End);
        }
    }
}

impl Direct {
    /// Hands this thread's records for `segment` to the writer, announced to the Chrome layer
    /// by an event sent through the global subscriber, which the gate passes on, unless
    /// `at_step` lets the profiler's flush take them (see [`Shared::hand_over`]).
    fn hand_over(&self, segment: u64, at_step: bool) {
        if let Some(dispatch) = &self.dispatch {
            self.shared.hand_over(segment, at_step, |event| dispatch.event(event));
        }
    }

    /// Keeps a begin or end in this thread's buffer, and hands a full buffer over (without the
    /// global subscriber to announce it, it grows until the gate's next boundary on this
    /// thread, at the latest the step's end, hands it over).
    /// IntFields go on the begin and on the end, as the gate keeps them (and only when the
    /// profiler keeps args).
    fn keep(&self, segment: u64, meta: &'static Metadata<'static>, name: Option<&str>, fields: IntFields, ph: Ph) {
        let shared = &self.shared;
        let name = name.map_or(NameSource::Static, NameSource::Text);
        // The fields are kept as numbers: the writer renders them (as the gate renders a
        // `tracing` span's), off the stepping thread.
        let args = (fields.len() > 0 && shared.include_args).then_some(ArgsSource::Ints(fields));
        if shared.batches.record(shared.sink_id(), segment, thread_id(), meta, name, args, ph) {
            self.hand_over(segment, false);
        }
    }
}

/// A layer's name as the trace writes it: control characters dropped, at most
/// [`LAYER_NAME_CHARS`] characters; `None` when nothing visible is left (the span's own name
/// then stands).
pub(crate) fn layer_name(name: &str) -> Option<Cow<'_, str>> {
    let clean = !name.chars().any(char::is_control) && name.chars().nth(LAYER_NAME_CHARS).is_none();
    let name = if clean {
        Cow::Borrowed(name)
    } else {
        Cow::Owned(name.chars().filter(|c| !c.is_control()).take(LAYER_NAME_CHARS).collect())
    };
    (!name.trim().is_empty()).then_some(name)
}

/// A span of steptrace's own target named by a constant, without fields or with up to four
/// integer (`u64`) fields: `let _forward = steptrace::own_span!(FORWARD);`, `let _load =
/// steptrace::own_span!(DATA_LOAD, batch = index);`. Kept directly where
/// [`Profiler::record_own_spans_directly`](crate::Profiler::record_own_spans_directly) allows
/// (see [`direct`](crate::collect::direct)), else the same as
/// `tracing::info_span!(target: "steptrace", NAME, batch = index).entered()`. Each value is
/// evaluated once, before the span begins.
#[macro_export]
macro_rules! own_span {
    ($name:expr) => {{
        static CALLSITE: $crate::direct::__private::DefaultCallsite =
            $crate::direct::__private::DefaultCallsite::new(&META);
        static META: $crate::direct::__private::Metadata<'static> =
            $crate::direct::__private::span_metadata($name, &CALLSITE);
        $crate::direct::OwnSpan::begin(&META, || {
            ::tracing::info_span!(target: $crate::format::names::TARGET, $name).entered()
        })
    }};
    ($name:expr, $($field:ident = $value:expr),+ $(,)?) => {{
        static CALLSITE: $crate::direct::__private::DefaultCallsite =
            $crate::direct::__private::DefaultCallsite::new(&META);
        static META: $crate::direct::__private::Metadata<'static> =
            $crate::direct::__private::span_metadata_with($name, &[$(stringify!($field)),+], &CALLSITE);
        // Every value before any name is bound: a value may read a variable a field shadows.
        let ($($field,)+) = ($($crate::direct::__private::field_value($value),)+);
        $crate::direct::OwnSpan::begin_with(&META, &[$((stringify!($field), $field)),+], || {
            ::tracing::info_span!(target: $crate::format::names::TARGET, $name, $($field),+).entered()
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
        span_metadata_with(name, &[], callsite)
    }

    /// A direct span's field value: a `u64`.
    #[inline(always)]
    pub const fn field_value(value: u64) -> u64 {
        value
    }

    /// [`span_metadata`] of a span with the fields `fields`.
    pub const fn span_metadata_with(
        name: &'static str,
        fields: &'static [&'static str],
        callsite: &'static DefaultCallsite,
    ) -> Metadata<'static> {
        Metadata::new(
            name,
            crate::format::names::TARGET,
            Level::INFO,
            None,
            None,
            None,
            FieldSet::new(fields, tracing_core::identify_callsite!(callsite)),
            Kind::SPAN,
        )
    }
}
