//! The state the profiler and the gate share on every thread: [`Shared`].

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};

use tracing_core::Metadata;

use crate::collect::schedule::Action;
use crate::format::names::{STEP_SPAN, TARGET};

static NEXT_SINK: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// The sink this thread's tracing-chrome sender is bound to.
    ///
    /// tracing-chrome binds each thread, once, to the channel of the first
    /// Chrome layer it sends to. Events of a thread bound to another sink
    /// would land in that sink's file (or nowhere), so they are counted
    /// instead.
    static BOUND_SINK: Cell<u64> = const { Cell::new(0) };

}

/// State shared between the profiler and the gate on every thread.
#[derive(Debug)]
pub(crate) struct Shared {
    action: AtomicU8,
    segment: AtomicU64,
    finished: AtomicBool,
    sink_id: u64,
    lost_events: AtomicU64,
    /// Events in flight to tracing-chrome's writer thread.
    pub(crate) backlog: super::backlog::Backlog,
    /// The stepping thread's spans on their way to the writer.
    pub(crate) batches: super::batch::Batches,
    /// Whether spans' fields are written as `args`.
    pub(crate) include_args: bool,
    /// An experiment ([`SPANS_ENV`]`=steps`): only the `ProfilerStep` spans are made while
    /// collecting, so that a step's cost can be split between its spans and the rest.
    only_steps: bool,
    /// Set by the profiler while it ends a step whose next step writes to the same file: that
    /// step's end waits in the stepping thread's buffer and goes to the writer with the next
    /// step's begin, one hand-over a step instead of two.
    pub(crate) step_end_waits: AtomicBool,
    /// Whether this profiler's gate is global and nothing else wants steptrace's spans (see
    /// [`allow_direct`](Self::allow_direct)).
    direct_allowed: AtomicBool,
    /// How steptrace's own spans are kept: [`OwnSpans`] as a number.
    own_spans: AtomicU8,
}

/// How steptrace's own spans of the stepping thread were kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OwnSpans {
    /// Through tracing's registry and the gate.
    Tracing = 0,
    /// As records, around tracing ([`direct`](super::direct)).
    Direct = 1,
    /// Through tracing, because [`crate::settings::OWN_SPANS`] asked for it.
    TracingAsked = 2,
}

/// An experiment's knob ([`crate::settings::SPANS`]): `steps` keeps only the `ProfilerStep`
/// spans while collecting (events, counters included, are kept); `unwritten` makes every span
/// but has the writer drop the stepping thread's records (what the writer's work beside the
/// step costs it); `announced` announces every batch through tracing-chrome, a step's too
/// (what the flushes taking them saves); every trace's `span_filter` says so.
pub(crate) const SPANS_ENV: &str = crate::settings::SPANS;

impl Shared {
    pub(crate) fn new(include_args: bool) -> Shared {
        use crate::settings::Spans;
        let spans = crate::settings::spans();
        let batches = super::batch::Batches::unwritten(spans == Spans::Unwritten);
        Shared {
            batches: if spans == Spans::Announced { batches.announcing_every() } else { batches },
            include_args,
            action: AtomicU8::new(Action::None.to_u8()),
            segment: AtomicU64::new(0),
            finished: AtomicBool::new(false),
            sink_id: NEXT_SINK.fetch_add(1, Ordering::Relaxed),
            lost_events: AtomicU64::new(0),
            backlog: super::backlog::Backlog::default(),
            only_steps: spans == Spans::Steps,
            step_end_waits: AtomicBool::new(false),
            direct_allowed: AtomicBool::new(false),
            own_spans: AtomicU8::new(OwnSpans::Tracing as u8),
        }
    }

    /// Hands this thread's records for `segment` to the writer: queued, then announced by
    /// `emit` (to the Chrome layer, on this thread) unless `at_step` (a step's begin or end)
    /// lets the profiler's next flush take them (see [`Batches::needs_announcing`]); waits
    /// while the writer is too far behind.
    ///
    /// [`Batches::needs_announcing`]: super::batch::Batches::needs_announcing
    pub(crate) fn hand_over(&self, segment: u64, at_step: bool, emit: impl FnOnce(&tracing_core::Event<'_>)) {
        let announced = self.batches.needs_announcing(super::threads::thread_id(), at_step);
        if let Some((id, _)) = self.batches.hand_over(self.sink_id, segment, announced) {
            if !announced {
                return;
            }
            self.backlog.send_one();
            super::batch::announce(id, emit);
            if self.batches.over(1) {
                self.backlog.wait_while(|| self.batches.over(1));
            }
        }
    }

    /// Whether the step that ends now leaves its end for the next step's begin to hand over.
    pub(crate) fn set_step_end_waits(&self, waits: bool) {
        self.step_end_waits.store(waits, Ordering::Release);
    }

    /// What the trace's metadata says of [`SPANS_ENV`] (`None`: every span is kept).
    pub(crate) fn span_filter(&self) -> Option<String> {
        if self.batches.unwritten {
            return Some(format!(
                "{SPANS_ENV}=unwritten: the stepping thread's spans were made but not written (an experiment)"
            ));
        }
        if self.batches.announce_every {
            return Some(format!("{SPANS_ENV}=announced: every batch of the stepping thread was announced through tracing-chrome (an experiment)"));
        }
        self.only_steps.then(|| format!("{SPANS_ENV}=steps: only the ProfilerStep spans were made (an experiment)"))
    }

    /// Whether `meta` is a span the [`SPANS_ENV`] experiment leaves out.
    #[inline]
    pub(crate) fn left_out(&self, meta: &Metadata<'_>) -> bool {
        self.only_steps && meta.is_span() && !(meta.name() == STEP_SPAN && meta.target() == TARGET)
    }

    pub(crate) fn set_action(&self, action: Action) {
        self.action.store(action.to_u8(), Ordering::Release);
    }

    pub(crate) fn set_segment(&self, segment: u64) {
        self.segment.store(segment, Ordering::Release);
    }

    pub(crate) fn finish(&self) {
        self.finished.store(true, Ordering::Release);
        self.set_action(Action::None);
        self.set_segment(0);
    }

    pub(crate) fn sink_id(&self) -> u64 {
        self.sink_id
    }

    /// Whether the profiler has finished.
    #[inline]
    pub(crate) fn finished(&self) -> bool {
        self.finished.load(Ordering::Acquire)
    }

    /// Lets the profiler keep its own spans around tracing ([`direct`](super::direct)): set
    /// by a global gate that no other layer needs to see them through.
    pub(crate) fn allow_direct(&self) {
        self.direct_allowed.store(true, Ordering::Release);
    }

    pub(crate) fn direct_allowed(&self) -> bool {
        self.direct_allowed.load(Ordering::Acquire)
    }

    pub(crate) fn set_own_spans(&self, how: OwnSpans) {
        self.own_spans.store(how as u8, Ordering::Release);
    }

    /// What every trace's metadata says of the path steptrace's own spans took (short words:
    /// the label scan takes sentences in metadata for input text).
    pub(crate) fn own_spans(&self) -> &'static str {
        match self.own_spans.load(Ordering::Acquire) {
            1 => "direct",
            2 => "tracing (STEPTRACE_OWN_SPANS)",
            _ => "tracing",
        }
    }

    pub(crate) fn lost_events(&self) -> u64 {
        self.lost_events.load(Ordering::Relaxed)
    }

    /// Marks the calling thread as bound to this sink (tracing-chrome binds
    /// the thread that builds a layer to that layer).
    pub(crate) fn bind_current_thread(&self) {
        BOUND_SINK.with(|b| b.set(self.sink_id));
    }

    #[inline]
    pub(crate) fn collecting(&self) -> bool {
        self.action.load(Ordering::Acquire) != 0
    }

    /// The open segment, or 0 when nothing is being written.
    #[inline]
    pub(crate) fn open_segment(&self) -> u64 {
        if self.collecting() {
            self.segment.load(Ordering::Acquire)
        } else {
            0
        }
    }

    pub(crate) fn bound_here(&self) -> bool {
        let ok = BOUND_SINK.with(|b| match b.get() {
            0 => {
                b.set(self.sink_id);
                true
            }
            id => id == self.sink_id,
        });
        if !ok {
            self.lost_events.fetch_add(1, Ordering::Relaxed);
        }
        ok
    }
}
