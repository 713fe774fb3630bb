//! Which spans are kept: the schedule gate.
//!
//! The gate has two halves that share one state, written by the
//! [`Profiler`](crate::Profiler) at each step and read by every thread:
//!
//! - A filter. While the current step's action is [`Action::None`](crate::collect::schedule::Action::None) (skip or
//!   wait phases) it rejects every span and event. It returns
//!   [`Interest::sometimes`] for the targets it may keep, so that the decision
//!   is made again for each span rather than cached per callsite, and
//!   [`Interest::never`] for targets that are not opted in. It comes in two
//!   forms:
//!   - **global** ([`ProfilerBuilder::build_global`](crate::ProfilerBuilder::build_global), used by
//!     [`ProfilerBuilder::try_install`](crate::ProfilerBuilder::try_install)): the gate is the subscriber's only
//!     layer and rejected spans are never created — the cheapest path;
//!   - **per-layer** ([`GateFilter`], from [`ProfilerBuilder::build`](crate::ProfilerBuilder::build)), to
//!     compose with other layers such as a log formatter. tracing-subscriber
//!     only disables a span outright when every per-layer filter slot
//!     rejects it, so here a rejected span is still created in the registry
//!     (other layers may want it); it is just not written.
//! - [`GateLayer`], which wraps the Chrome layer and forwards enter, exit and
//!   event callbacks only while a trace segment is open. An end whose begin
//!   went to an earlier segment (or to none) is dropped when the file is
//!   finalised, so no file keeps an end without its begin. During warmup the segment is open and
//!   spans are written, then the finaliser drops everything before the first
//!   recorded step: the collector's start-up happens, but outside the window.
//!
//! # Target policy
//!
//! steptrace's own spans (targets starting with `steptrace`) are always
//! kept. Spans of other crates, such as burn's and cubecl's internals (about
//! 1 MB of TRACE spans per step), are kept only for targets the caller opts
//! in to with [`ProfilerBuilder::targets`](crate::ProfilerBuilder::targets).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use tracing_chrome::ChromeLayer;
use tracing_core::span::{Attributes, Id, Record};
use tracing_core::{Event, Interest, Metadata, Subscriber};
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::{Context, Filter, Layer};
use tracing_subscriber::registry::LookupSpan;

use crate::format::names::LAYER_SPAN;
pub use crate::format::names::{STEP_SPAN, TARGET};

use super::args::{Fields, LayerVisitor, SpanArgs, StepVisitor};
pub(crate) use super::args::{LayerName, MessageVisitor, StepNumber};
use super::batch::{ArgsSource, NameSource, Ph};
pub(crate) use super::shared::{OwnSpans, Shared};
use super::threads::thread_id;
pub(crate) use super::threads::{tagged_category, thread_name};

// === impl GateFilter ===

/// The per-layer filter half of the gate. See the [module docs](crate::collect::gate).
#[derive(Debug)]
pub struct GateFilter {
    shared: Arc<Shared>,
    targets: Targets,
}

impl GateFilter {
    pub(crate) fn new(shared: Arc<Shared>, targets: Targets) -> GateFilter {
        GateFilter { shared, targets }
    }
}

impl<S> Filter<S> for GateFilter {
    #[inline]
    fn enabled(&self, meta: &Metadata<'_>, _cx: &Context<'_, S>) -> bool {
        self.shared.collecting()
            && self.targets.would_enable(meta.target(), meta.level())
            && !self.shared.left_out(meta)
    }

    fn callsite_enabled(&self, meta: &'static Metadata<'static>) -> Interest {
        if self.targets.would_enable(meta.target(), meta.level()) {
            Interest::sometimes()
        } else {
            Interest::never()
        }
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Filter::<S>::max_level_hint(&self.targets)
    }
}

// === impl GateLayer ===

/// The layer half of the gate: the Chrome layer behind a per-segment
/// forwarding check. See the [module docs](crate::collect::gate).
pub struct GateLayer<S>
where
    S: Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
{
    inner: ChromeLayer<S>,
    shared: Arc<Shared>,
    /// Set when the gate filters globally (see [`Profiler::builder`]'s
    /// `build_global`): spans it rejects are never created at all.
    global: Option<Targets>,
    /// Whether steptrace's own spans are created in every step, for another layer that
    /// mirrors them (see `ProfilerBuilder::own_spans_in_every_step`); written only in windows.
    own_spans: bool,
}

impl<S> std::fmt::Debug for GateLayer<S>
where
    S: Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GateLayer").field("shared", &self.shared).finish_non_exhaustive()
    }
}

impl<S> GateLayer<S>
where
    S: Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
{
    pub(crate) fn new(inner: ChromeLayer<S>, shared: Arc<Shared>, global: Option<Targets>) -> GateLayer<S> {
        GateLayer { inner, shared, global, own_spans: false }
    }

    pub(crate) fn keeping_own_spans(mut self, keep: bool) -> GateLayer<S> {
        self.own_spans = keep;
        self
    }
}

impl<S> Layer<S> for GateLayer<S>
where
    S: Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
{
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> Interest {
        match &self.global {
            Some(targets) if !targets.would_enable(meta.target(), meta.level()) => Interest::never(),
            _ => Interest::sometimes(),
        }
    }

    #[inline]
    fn enabled(&self, meta: &Metadata<'_>, _ctx: Context<'_, S>) -> bool {
        match &self.global {
            Some(targets) => {
                let kept = self.shared.collecting() || (self.own_spans && meta.is_span() && meta.target() == TARGET);
                kept && targets.would_enable(meta.target(), meta.level()) && !self.shared.left_out(meta)
            }
            None => true,
        }
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        self.global.as_ref().and_then(|t| Filter::<S>::max_level_hint(t))
    }

    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let meta = attrs.metadata();
        if meta.name() == STEP_SPAN && meta.target() == TARGET {
            // The thread that opens the steps keeps its spans in batches (see `batch`).
            self.shared.batches.set_stepping(thread_id());
            let mut visitor = StepVisitor(None);
            attrs.record(&mut visitor);
            if let (Some(step), Some(span)) = (visitor.0, ctx.span(id)) {
                span.extensions_mut().insert(StepNumber(step));
            }
            // The step number is in the name: no args, so that begin and end
            // match exactly (speedscope renames spans whose begin has args).
            return;
        }
        if meta.name() == LAYER_SPAN && meta.target() == TARGET {
            // Named only while a segment is open: outside the window a layer span costs
            // no allocation. Like the step, its name carries it (no args).
            if self.shared.open_segment() != 0 {
                let mut visitor = LayerVisitor(None);
                attrs.record(&mut visitor);
                if let (Some(name), Some(span)) = (visitor.0, ctx.span(id)) {
                    span.extensions_mut().insert(LayerName(name));
                }
            }
            return;
        }
        // tracing-chrome (threaded style) only keeps a span's args here: a
        // span without fields has none, now or later, and its events come out
        // the same without the empty args object it would store.
        // A span's fields are kept for the stepping thread's records and, since a span made on
        // one thread may be entered on another, for tracing-chrome too; but steptrace's own
        // spans are entered where they are made, and those of the stepping thread never reach
        // tracing-chrome, so they skip its copy (a map, a key and a text per field).
        // (Should such a span be entered on another thread after all, tracing-chrome gets its
        // copy then: `give_chrome_args`.)
        if self.shared.open_segment() != 0 && !meta.fields().is_empty() {
            let skip_chrome = meta.target() == TARGET && self.stepping_here();
            if self.shared.include_args {
                if let Some(span) = ctx.span(id) {
                    let mut args = SpanArgs::of(attrs);
                    args.chrome_pending = skip_chrome;
                    span.extensions_mut().insert(args);
                }
            }
            if !skip_chrome {
                self.inner.on_new_span(attrs, id, ctx);
            }
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if self.shared.open_segment() != 0 {
            if let Some(span) = ctx.span(id) {
                if let Some(args) = span.extensions_mut().get_mut::<SpanArgs>() {
                    args.record(values);
                }
            }
            self.inner.on_record(id, values, ctx);
        }
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        self.boundary(id, ctx, true);
    }

    /// Ends are forwarded while a segment is open, without per-span
    /// bookkeeping: an end whose begin went to an earlier segment (or to
    /// none) has no begin in this file, and spans on one thread nest, so the
    /// finaliser's per-thread pairing finds it unmatched and drops it.
    fn on_exit(&self, id: &Id, ctx: Context<'_, S>) {
        self.boundary(id, ctx, false);
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let segment = self.shared.open_segment();
        // The batches' announcements own their target: another event of it is dropped, so
        // that the writer never takes it for one; the direct path's own (`direct`), made with
        // metadata nothing else can name, pass to the Chrome layer on the thread that made them.
        if event.metadata().target() == super::batch::BATCH_TARGET {
            if super::batch::is_announcement(event.metadata()) && segment != 0 && self.stepping_here() {
                self.inner.on_event(event, ctx);
            }
            return;
        }
        if segment != 0 && self.shared.bound_here() {
            if self.stepping_here() {
                if self.keep_event(event, segment) {
                    self.hand_over(segment, false, &ctx);
                }
            } else {
                self.shared.backlog.send_one();
                self.inner.on_event(event, ctx);
            }
        }
    }
}

impl<S> GateLayer<S>
where
    S: Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
{
    /// A span's begin or end: kept on the stepping thread, sent to tracing-chrome elsewhere.
    fn boundary(&self, id: &Id, ctx: Context<'_, S>, begin: bool) {
        let segment = self.shared.open_segment();
        if segment == 0 || !self.shared.bound_here() {
            return;
        }
        if !self.stepping_here() {
            self.shared.backlog.send_one();
            if begin {
                self.give_chrome_args(id, &ctx);
                self.inner.on_enter(id, ctx);
            } else {
                self.inner.on_exit(id, ctx);
            }
            return;
        }
        let kept = self.keep(id, &ctx, segment, begin);
        // A step's begin hands the thread's records over at once, so that the profiler's flush
        // puts it in the partial file and a run that hangs or is killed inside a step leaves
        // the step it was in. Its end does too, before the profiler may close the segment,
        // unless the next step writes to the same file: then the next begin takes both.
        let end_waits = !begin && self.shared.step_end_waits.load(Ordering::Acquire);
        if kept.full || (kept.step && !end_waits) {
            self.hand_over(segment, kept.step, &ctx);
        }
    }

    /// Gives tracing-chrome the fields of a span made on the stepping thread, whose copy it
    /// skipped, before another thread enters the span: one field at a time, the first as the
    /// span's attributes and the rest as records, each with the text it had.
    fn give_chrome_args(&self, id: &Id, ctx: &Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let meta = span.metadata();
        if meta.target() != TARGET || meta.fields().is_empty() {
            return;
        }
        let fields = match span.extensions_mut().get_mut::<SpanArgs>() {
            Some(args) if args.chrome_pending => {
                args.chrome_pending = false;
                args.fields.clone()
            }
            _ => return,
        };
        let mut first = true;
        fields.each(|name, value| {
            let Some(field) = meta.fields().field(name) else { return };
            let values = [(&field, Some(value))];
            let set = meta.fields().value_set(&values);
            if std::mem::take(&mut first) {
                self.inner.on_new_span(&Attributes::new(meta, &set), id, ctx.clone());
            } else {
                self.inner.on_record(id, &Record::new(&set), ctx.clone());
            }
        });
    }

    /// Whether this gate is the one of the profiler sharing `shared`.
    pub(crate) fn shares(&self, shared: &Arc<Shared>) -> bool {
        Arc::ptr_eq(&self.shared, shared)
    }

    #[inline]
    fn stepping_here(&self) -> bool {
        self.shared.batches.is_stepping(thread_id())
    }

    /// Keeps a begin or end of the stepping thread.
    fn keep(&self, id: &Id, ctx: &Context<'_, S>, segment: u64, begin: bool) -> Kept {
        let Some(span) = ctx.span(id) else { return Kept { full: false, step: false } };
        let meta = span.metadata();
        let ph = if begin { Ph::Begin } else { Ph::End };
        let record = |name, args: Option<&str>| {
            self.shared.batches.record(
                self.shared.sink_id(),
                segment,
                thread_id(),
                meta,
                name,
                args.map(ArgsSource::Text),
                ph,
            )
        };
        // A span without fields has neither a name of its own nor args: its extensions are not
        // read (most of a step's spans).
        if meta.fields().is_empty() {
            return Kept { full: record(NameSource::Static, None), step: false };
        }
        let extensions = span.extensions();
        let ours = meta.target() == TARGET;
        let step = ours && meta.name() == STEP_SPAN;
        // Named as the Chrome layer's `render_name` names them.
        let name = if !ours {
            NameSource::Static
        } else if step {
            extensions.get::<StepNumber>().map_or(NameSource::Static, |n| NameSource::Step(n.0))
        } else if meta.name() == LAYER_SPAN {
            extensions.get::<LayerName>().map_or(NameSource::Static, |n| NameSource::Text(&n.0))
        } else {
            NameSource::Static
        };
        let args = extensions.get::<SpanArgs>().map(|a| a.text.as_str()).filter(|text| *text != "{}");
        Kept { full: record(name, args), step }
    }

    /// Keeps an event of the stepping thread, named and with its fields as the Chrome layer
    /// writes them; returns whether the buffer is full.
    fn keep_event(&self, event: &Event<'_>, segment: u64) -> bool {
        let name = crate::collect::sink::event_name(event);
        let args = self.shared.include_args.then(|| {
            let mut fields = Fields::default();
            event.record(&mut fields);
            fields.to_json()
        });
        let (sink, thread) = (self.shared.sink_id(), thread_id());
        let args = args.as_deref().filter(|text| *text != "{}");
        self.shared.batches.record(
            sink,
            segment,
            thread,
            event.metadata(),
            NameSource::Text(&name),
            args.map(ArgsSource::Text),
            Ph::Instant,
        )
    }

    /// Hands this thread's kept spans to the writer, announced by one event through
    /// tracing-chrome where the profiler's flush will not take them (`at_step`: at a step's
    /// begin or end; see [`Shared::hand_over`]).
    fn hand_over(&self, segment: u64, at_step: bool, ctx: &Context<'_, S>) {
        self.shared.hand_over(segment, at_step, |event| self.inner.on_event(event, ctx.clone()));
    }
}

/// What keeping a span's begin or end found.
struct Kept {
    /// The thread's buffer is full.
    full: bool,
    /// The span is a `ProfilerStep`.
    step: bool,
}

#[cfg(test)]
mod tests {
    use crate::{Profiler, Schedule};
    use tracing_subscriber::prelude::*;

    fn run_step_span(schedule: &str) -> (bool, bool) {
        let dir = tempfile::tempdir().unwrap();
        let schedule: Schedule = schedule.parse().unwrap();
        let (layer, mut profiler) = Profiler::builder(schedule).out_dir(dir.path()).build_global().unwrap();
        let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
        tracing::dispatcher::with_default(&dispatch, || {
            profiler.start();
            let ours = tracing::info_span!(target: "steptrace", "forward");
            let other = tracing::info_span!(target: "some_crate", "work");
            (ours.is_disabled(), other.is_disabled())
        })
    }

    #[test]
    fn per_layer_gate_writes_nothing_in_wait_but_lets_other_layers_see_spans() {
        let dir = tempfile::tempdir().unwrap();
        let (layer, mut profiler) =
            Profiler::builder("wait=1,active=1".parse().unwrap()).out_dir(dir.path()).build().unwrap();
        let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
        let disabled = tracing::dispatcher::with_default(&dispatch, || {
            profiler.start();
            tracing::info_span!(target: "steptrace", "forward").is_disabled()
        });
        // tracing-subscriber keeps spans that only per-layer filters reject.
        assert!(!disabled);
    }

    #[test]
    fn a_recorded_step_hands_its_records_over_once_and_the_flushes_write_every_step_whole() {
        let dir = tempfile::tempdir().unwrap();
        // Two windows of three recorded steps each, then a step outside them.
        let schedule: Schedule = "wait=1,warmup=1,active=3,repeat=2".parse().unwrap();
        let (layer, mut profiler) = Profiler::builder(schedule).out_dir(dir.path()).build_global().unwrap();
        let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
        let saved = tracing::dispatcher::with_default(&dispatch, || {
            profiler.start();
            let mut announced_at_first = None;
            for step in 0..11 {
                drop(tracing::info_span!(target: "steptrace", "forward", batch = 3u64).entered());
                profiler.step();
                if step == 0 {
                    // Step 1 (the first warmup) began: its hand-over was announced, as the
                    // writer did not know this thread yet. Wait until it has read that line.
                    let batches = &profiler.shared().batches;
                    let start = std::time::Instant::now();
                    while batches.tid_of(crate::collect::threads::thread_id()).is_none() {
                        assert!(start.elapsed().as_secs() < 30, "the writer never read the announcement");
                        std::thread::sleep(std::time::Duration::from_millis(1));
                    }
                    announced_at_first = Some(batches.announced());
                }
            }
            let batches = &profiler.shared().batches;
            // 8 collecting steps (2 x warmup and 3 active): one hand-over at each begin, and one
            // at the end of each window's last step, whose next step writes elsewhere.
            assert_eq!(batches.handed_over(), 8 + 2, "hand-overs");
            // Once the writer knew the thread, the profiler's flushes took every later one.
            assert_eq!(announced_at_first, Some(1));
            assert_eq!(batches.announced(), 1, "every later hand-over was at a step, unannounced");
            profiler.finish().unwrap()
        });
        assert_eq!(saved.len(), 2);
        for trace in &saved {
            let text = std::fs::read_to_string(&trace.path).unwrap();
            let file: serde_json::Value = serde_json::from_str(&text).unwrap();
            let events = file["traceEvents"].as_array().unwrap();
            let complete = |name: &str| {
                events
                    .iter()
                    .filter(|e| e["ph"] == "X" && e["name"].as_str().is_some_and(|n| n.starts_with(name)))
                    .count()
            };
            assert_eq!(complete("ProfilerStep#"), 3, "{text}");
            assert_eq!(complete("forward"), 3, "{text}");
            assert!(events.iter().any(|e| e["name"] == "forward" && e["args"]["batch"] == "3"), "{text}");
            assert!(!text.contains("steptrace::batch"), "{text}");
        }
    }

    #[test]
    fn wait_phase_spans_are_disabled_outright() {
        // Step 0 waits: the registry never creates the span.
        assert_eq!(run_step_span("wait=1,active=1"), (true, true));
        // Step 0 records: our span exists, another crate's does not.
        assert_eq!(run_step_span("active=1"), (false, true));
        // Warmup collects (and discards later).
        assert_eq!(run_step_span("warmup=1,active=1"), (false, true));
    }
}
