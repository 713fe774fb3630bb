//! The stepping thread's span begins and ends and its events, handed to the writer a step at
//! a time.
//!
//! tracing-chrome sends one message per span begin and one per end, each with two freshly
//! allocated strings (name and category) that its writer thread frees. On a launch-bound
//! training step that is most of what steptrace's spans cost (`docs/benchmarks/archive-2026-12-03.md`: about
//! 1.3–1.8 µs a span inside a step, a third of it in `malloc`). The thread that runs the
//! steps (the one that enters the `ProfilerStep` spans) therefore keeps its begins and ends
//! as fixed records in a thread-local buffer instead: a time, the span's static metadata and
//! where its name and arguments are, without an allocation once the buffer has grown. Its
//! events (instants and counter samples) are records too, their name and fields rendered on
//! the spot into the buffer's text.
//!
//! When the step span begins or ends (or the buffer is full), the buffer becomes a [`Batch`]
//! in the sink's queue. The segment writer writes a batch's lines in the form tracing-chrome
//! writes them ([`sink::expand`](crate::collect::sink)), so the partial file, the finaliser and every
//! reader see what they would see from tracing-chrome, at one of two places:
//! - at the profiler's flush, which follows each recorded step's begin and each window's end:
//!   the writer takes the queued batches there, between two of tracing-chrome's events. A
//!   step's batches go this way, once the writer knows the stepping thread's `tid` (which only
//!   tracing-chrome can tell);
//! - where tracing-chrome wrote an event of the target [`BATCH_TARGET`], named by the batch's
//!   id, which the stepping thread sent in the batch's place: a thread's first batch (its line
//!   tells the writer the `tid`), a buffer that fills inside a step, and any batch while half a
//!   bound is queued. Such an event costs the step tracing-chrome's `on_event` (a map, two
//!   strings, a channel message): on the launch-bound MLP, announcing every step's batch cost
//!   +0.7% of a step (`docs/benchmarks.md`).
//!
//! Order: the finaliser pairs begins with ends per thread, in file order. Everything the
//! stepping thread writes is a record, and its batches leave the queue in order (a flush stops
//! at an announced batch, whose announcement takes it and every batch before it), so its lines
//! keep their order. A step's begin reaches the partial file when the step starts (the
//! profiler flushes then), the rest of it when it ends. Time: records use
//! tracing-chrome's clock, from an origin taken right after its layer is built (a few
//! nanoseconds after tracing-chrome's own, so a record's time is at most that much early).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use tracing_core::callsite::DefaultCallsite;
use tracing_core::field::{FieldSet, Value};
use tracing_core::metadata::Kind;
use tracing_core::{Event, Level, Metadata};

use super::args::IntFields;

/// The target of the event that stands for a batch in tracing-chrome's stream (reserved).
pub(crate) const BATCH_TARGET: &str = "steptrace::batch";
/// Records a buffer holds before it is handed over inside a step.
pub(crate) const MAX_RECORDS: usize = 1024;
/// Emptied batches kept for reuse.
const KEEP_FREE: usize = 4;
/// Most records queued for the writer before the stepping thread waits for it (about 15 MB).
///
/// tracing-chrome's writer buffers its output 8 KiB at a time, so the segment writer sees an
/// announcement (and takes its batch off the queue) only once some 70 more have followed it:
/// the bound must hold that many full batches, or a thread waiting for the queue to shrink
/// would wait for announcements that only it can send.
pub(crate) const QUEUE_CAP: u64 = 256 * MAX_RECORDS as u64;
/// Most batches queued: some 6,000 steps' worth, so that a window's steps outlast the
/// previous window's finalising (which the writer does between messages) without waiting,
/// and a small batch's buffers (about 2 KB, whatever it holds) stay under 10 MB in all.
pub(crate) const QUEUE_BATCHES: u64 = 4096;

/// Where a record's name comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Name {
    /// The span's metadata name.
    Static,
    /// `ProfilerStep#N`.
    Step(u64),
    /// Text in the batch's [`Batch::text`].
    Text(u32, u32),
}

/// A name as the gate hands it over.
#[derive(Clone, Copy)]
pub(crate) enum NameSource<'a> {
    Static,
    Step(u64),
    Text(&'a str),
}

/// A record's arguments as handed over.
#[derive(Clone, Copy)]
pub(crate) enum ArgsSource<'a> {
    /// A JSON object, rendered already.
    Text(&'a str),
    /// Integer fields, rendered by the writer ([`u64_json`](super::args::u64_json)).
    Ints(IntFields),
}

/// Where a record's arguments are kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Args {
    /// A JSON object in [`Batch::text`].
    Text(u32, u32),
    /// Integer fields: [`Batch::ints`]'s entry.
    Ints(u32),
}

/// What a record is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ph {
    Begin,
    End,
    /// An event (an instant, or a counter's sample).
    Instant,
}

/// One span begin or end, or one event.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Record {
    pub(crate) at: Instant,
    pub(crate) meta: &'static Metadata<'static>,
    pub(crate) name: Name,
    /// Its arguments.
    pub(crate) args: Option<Args>,
    pub(crate) ph: Ph,
}

/// A thread's records, handed over together.
#[derive(Debug)]
pub(crate) struct Batch {
    pub(crate) id: u64,
    sink: u64,
    /// The segment (the window's file) whose records these are.
    pub(crate) segment: u64,
    /// steptrace's id of the thread that recorded it.
    pub(crate) thread: u64,
    /// Whether an event announces it: a flush leaves it for the announcement (see
    /// [`Batches::take`]).
    announced: bool,
    pub(crate) records: Vec<Record>,
    text: String,
    ints: Vec<IntFields>,
}

impl Batch {
    fn new() -> Batch {
        Batch {
            id: 0,
            sink: 0,
            segment: 0,
            thread: 0,
            announced: false,
            records: Vec::with_capacity(32),
            text: String::with_capacity(128),
            ints: Vec::new(),
        }
    }

    fn clear(&mut self) {
        self.announced = false;
        self.records.clear();
        self.text.clear();
        self.ints.clear();
    }

    /// Text kept for a record (empty when out of range).
    pub(crate) fn text(&self, (start, len): (u32, u32)) -> &str {
        let start = start as usize;
        self.text.get(start..start + len as usize).unwrap_or("")
    }

    /// Integer fields kept for a record.
    pub(crate) fn ints(&self, at: u32) -> Option<&IntFields> {
        self.ints.get(at as usize)
    }

    fn keep_args(&mut self, args: ArgsSource<'_>) -> Args {
        match args {
            ArgsSource::Text(text) => {
                let (start, len) = self.keep_text(text);
                Args::Text(start, len)
            }
            ArgsSource::Ints(fields) => {
                self.ints.push(fields);
                Args::Ints(u32::try_from(self.ints.len() - 1).unwrap_or(u32::MAX))
            }
        }
    }

    fn keep_text(&mut self, text: &str) -> (u32, u32) {
        let start = u32::try_from(self.text.len()).unwrap_or(u32::MAX);
        self.text.push_str(text);
        (start, u32::try_from(text.len()).unwrap_or(0))
    }
}

thread_local! {
    /// This thread's records not yet handed over.
    static BUFFER: RefCell<Option<Batch>> = const { RefCell::new(None) };
}

/// The queue between the stepping thread and the segment writer.
#[derive(Default)]
pub(crate) struct Batches {
    /// tracing-chrome's time 0.
    origin: OnceLock<Instant>,
    /// steptrace's id of the thread that enters the step spans (0: none yet).
    stepping: AtomicU64,
    next_id: AtomicU64,
    /// How many batches were announced.
    announced: AtomicU64,
    /// Records in the queue.
    queued: AtomicU64,
    /// Batches in the queue.
    queued_batches: AtomicU64,
    queue: Mutex<VecDeque<Batch>>,
    free: Mutex<Vec<Batch>>,
    /// The thread whose tracing-chrome `tid` the writer last learned (0: none): its batches
    /// handed over at a step's boundary need no announcement ([`needs_announcing`]).
    ///
    /// [`needs_announcing`]: Batches::needs_announcing
    known_thread: AtomicU64,
    /// tracing-chrome's `tid` of each thread that announced a batch, learned from the
    /// announcing lines (few threads ever step).
    tids: Mutex<Vec<(u64, u64)>>,
    /// An experiment (`STEPTRACE_SPANS=unwritten`): the writer claims each batch announced to it
    /// and writes none of its records.
    pub(crate) unwritten: bool,
    /// An experiment (`STEPTRACE_SPANS=announced`): every batch is announced, as before the
    /// flushes took a step's batches.
    pub(crate) announce_every: bool,
}

impl std::fmt::Debug for Batches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batches")
            .field("stepping", &self.stepping.load(Ordering::Relaxed))
            .field("queued", &self.queue.lock().map(|q| q.len()).unwrap_or(0))
            .finish_non_exhaustive()
    }
}

impl Batches {
    /// An empty queue; with `unwritten`, the experiment that writes none of its records.
    pub(crate) fn unwritten(unwritten: bool) -> Batches {
        Batches { unwritten, ..Batches::default() }
    }

    /// An empty queue whose every batch is announced (an experiment).
    pub(crate) fn announcing_every(self) -> Batches {
        Batches { announce_every: true, ..self }
    }

    pub(crate) fn set_origin(&self, origin: Instant) {
        let _ = self.origin.set(origin);
    }

    /// tracing-chrome's time 0 (`None` before the layer is built).
    pub(crate) fn origin(&self) -> Option<Instant> {
        self.origin.get().copied()
    }

    pub(crate) fn set_stepping(&self, thread: u64) {
        self.stepping.store(thread, Ordering::Relaxed);
    }

    /// Records queued for the writer.
    pub(crate) fn queued(&self) -> u64 {
        self.queued.load(Ordering::Relaxed)
    }

    /// Whether more than `1/part` of either bound ([`QUEUE_CAP`] records, [`QUEUE_BATCHES`]
    /// batches) is queued: with `part` 1 the stepping thread waits for the writer; the writer
    /// stops lingering at 2.
    pub(crate) fn over(&self, part: u64) -> bool {
        self.queued() > QUEUE_CAP / part || self.queued_batches.load(Ordering::Relaxed) > QUEUE_BATCHES / part
    }

    /// Whether `thread` enters the step spans.
    #[inline]
    /// How many batches were handed over so far.
    #[cfg(test)]
    pub(crate) fn handed_over(&self) -> u64 {
        self.next_id.load(Ordering::Relaxed)
    }

    /// How many of them were announced.
    #[cfg(test)]
    pub(crate) fn announced(&self) -> u64 {
        self.announced.load(Ordering::Relaxed)
    }

    pub(crate) fn is_stepping(&self, thread: u64) -> bool {
        self.stepping.load(Ordering::Relaxed) == thread
    }

    /// Keeps a begin, end or event of this thread, which belongs to `sink`'s open `segment`.
    /// Returns whether the buffer is full (the caller hands it over).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn record(
        &self,
        sink: u64,
        segment: u64,
        thread: u64,
        meta: &'static Metadata<'static>,
        name: NameSource<'_>,
        args: Option<ArgsSource<'_>>,
        ph: Ph,
    ) -> bool {
        let at = Instant::now();
        // (`try_with`: a profiler finished from a thread-local destructor may get here after
        // this buffer is gone; its record is then lost, not the process.)
        let kept = BUFFER.try_with(|buffer| {
            let Ok(mut buffer) = buffer.try_borrow_mut() else { return false };
            let batch = buffer.get_or_insert_with(|| self.fresh());
            if batch.sink != sink || batch.segment != segment || batch.thread != thread {
                // Records of a segment that has closed went nowhere: they never will.
                batch.clear();
                (batch.sink, batch.segment, batch.thread) = (sink, segment, thread);
            }
            let name = match name {
                NameSource::Static => Name::Static,
                NameSource::Step(n) => Name::Step(n),
                NameSource::Text(text) => {
                    let (start, len) = batch.keep_text(text);
                    Name::Text(start, len)
                }
            };
            let args = args.map(|args| batch.keep_args(args));
            batch.records.push(Record { at, meta, name, args, ph });
            batch.records.len() >= MAX_RECORDS
        });
        kept.unwrap_or(false)
    }

    /// Moves this thread's records for `sink`'s `segment` to the queue, to be `announced` or
    /// taken at a flush; returns its id and the number of records (`None`: nothing to hand
    /// over).
    pub(crate) fn hand_over(&self, sink: u64, segment: u64, announced: bool) -> Option<(u64, usize)> {
        let batch = BUFFER.try_with(|buffer| {
            let mut buffer = buffer.try_borrow_mut().ok()?;
            let current = buffer.as_mut()?;
            if current.records.is_empty() {
                return None;
            }
            if current.sink != sink || current.segment != segment {
                current.clear();
                return None;
            }
            let mut next = self.fresh();
            (next.sink, next.segment, next.thread) = (current.sink, current.segment, current.thread);
            Some(std::mem::replace(current, next))
        });
        let mut batch = batch.ok().flatten()?;
        batch.id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        batch.announced = announced;
        if announced {
            self.announced.fetch_add(1, Ordering::Relaxed);
        }
        let (id, records) = (batch.id, batch.records.len());
        self.queue.lock().ok()?.push_back(batch);
        self.queued.fetch_add(records as u64, Ordering::Relaxed);
        self.queued_batches.fetch_add(1, Ordering::Relaxed);
        Some((id, records))
    }

    /// Whether a batch of `thread` handed over now must be announced to the writer: always
    /// inside a step (`at_step` false: a full buffer), while the writer does not know the
    /// thread's tracing-chrome `tid` yet, and once half a bound is queued (a writer that stopped
    /// lingering then finds a message to take the queue at). Otherwise the profiler's flush,
    /// which follows each recorded step's begin and each window's end, has the writer take it
    /// ([`take`](Batches::take)).
    #[inline]
    pub(crate) fn needs_announcing(&self, thread: u64, at_step: bool) -> bool {
        !at_step || self.announce_every || self.known_thread.load(Ordering::Acquire) != thread || self.over(2)
    }

    /// Notes `thread`'s tracing-chrome `tid`, read from a line that announced its batch.
    pub(crate) fn learn_tid(&self, thread: u64, tid: u64) {
        if let Ok(mut tids) = self.tids.lock() {
            match tids.iter_mut().find(|(t, _)| *t == thread) {
                Some(known) => known.1 = tid,
                None => tids.push((thread, tid)),
            }
        }
        self.known_thread.store(thread, Ordering::Release);
    }

    /// tracing-chrome's `tid` of `thread`, once learned.
    pub(crate) fn tid_of(&self, thread: u64) -> Option<u64> {
        self.tids.lock().ok()?.iter().find(|(t, _)| *t == thread).map(|&(_, tid)| tid)
    }

    /// Takes the queue's batches, from the front, for a writer of `segment`:
    /// - `through: Some(id)` (an announcement of batch `id` was read): every batch up to `id`;
    /// - `None` (a flush): the batches of `segment` and earlier ones, up to the first that is
    ///   announced or whose thread's `tid` is not known yet (its announcement, or a later
    ///   one's, follows in tracing-chrome's stream and takes it then).
    ///
    /// A later segment's batch stays for its own writer.
    pub(crate) fn take(&self, segment: u64, through: Option<u64>) -> Vec<Batch> {
        let Ok(mut queue) = self.queue.lock() else { return Vec::new() };
        let mut count = 0;
        for batch in queue.iter() {
            let stop = batch.segment > segment
                || match through {
                    Some(id) => batch.id > id,
                    None => batch.announced || self.tid_of(batch.thread).is_none(),
                };
            if stop {
                break;
            }
            count += 1;
        }
        let taken: Vec<Batch> = queue.drain(..count).collect();
        drop(queue);
        for batch in &taken {
            self.queued.fetch_sub(batch.records.len() as u64, Ordering::Relaxed);
            self.queued_batches.fetch_sub(1, Ordering::Relaxed);
        }
        taken
    }

    /// Gives a written batch back for reuse.
    pub(crate) fn recycle(&self, mut batch: Batch) {
        batch.clear();
        if let Ok(mut free) = self.free.lock() {
            if free.len() < KEEP_FREE {
                free.push(batch);
            }
        }
    }

    fn fresh(&self) -> Batch {
        self.free.lock().ok().and_then(|mut free| free.pop()).unwrap_or_else(Batch::new)
    }
}

static ANNOUNCE_CALLSITE: DefaultCallsite = DefaultCallsite::new(&ANNOUNCE);
static ANNOUNCE: Metadata<'static> = Metadata::new(
    "steptrace batch",
    BATCH_TARGET,
    Level::INFO,
    None,
    None,
    None,
    FieldSet::new(&["message"], tracing_core::identify_callsite!(&ANNOUNCE_CALLSITE)),
    Kind::EVENT,
);

/// Calls `emit` with the event that announces batch `id`: its message (tracing-chrome's
/// name for it) is the id.
pub(crate) fn announce(id: u64, emit: impl FnOnce(&Event<'_>)) {
    let fields = ANNOUNCE.fields();
    let Some(field) = fields.field("message") else { return };
    let values = [(&field, Some(&id as &dyn Value))];
    let set = fields.value_set(&values);
    emit(&Event::new(&ANNOUNCE, &set));
}

/// Whether `meta` is the announcements' own (no event made elsewhere has it).
pub(crate) fn is_announcement(meta: &Metadata<'_>) -> bool {
    std::ptr::eq(meta, &ANNOUNCE)
}

/// A span's metadata for tests: `forward`, of steptrace's target.
#[cfg(test)]
pub(crate) static TEST_SPAN: Metadata<'static> = Metadata::new(
    "forward",
    "steptrace",
    Level::INFO,
    None,
    None,
    None,
    FieldSet::new(&[], tracing_core::identify_callsite!(&ANNOUNCE_CALLSITE)),
    Kind::SPAN,
);

#[cfg(test)]
mod tests {
    use super::*;

    static SPAN: &Metadata<'static> = &TEST_SPAN;

    #[test]
    fn records_are_handed_over_in_order_with_their_text_and_only_to_their_segment() {
        let batches = Batches::default();
        assert!(!batches.record(
            1,
            7,
            3,
            SPAN,
            NameSource::Text("conv1"),
            Some(ArgsSource::Text(r#"{"a":"1"}"#)),
            Ph::Begin
        ));
        assert!(!batches.record(1, 7, 3, SPAN, NameSource::Step(4), None, Ph::End));
        let (id, records) = batches.hand_over(1, 7, true).expect("two records");
        assert_eq!(records, 2);
        // Nothing more to hand over, and a closed segment's records are dropped.
        assert_eq!(batches.hand_over(1, 7, true), None);
        batches.record(1, 7, 3, SPAN, NameSource::Static, None, Ph::Begin);
        assert_eq!(batches.hand_over(1, 8, true), None);
        assert_eq!(batches.hand_over(1, 7, true), None);

        let mut taken = batches.take(7, Some(id));
        assert_eq!(taken.len(), 1);
        let batch = taken.pop().unwrap();
        assert_eq!(batch.id, id);
        assert_eq!(batch.thread, 3);
        assert_eq!(batch.records.len(), 2);
        let (first, second) = (batch.records[0], batch.records[1]);
        assert_eq!((first.ph, second.ph), (Ph::Begin, Ph::End));
        assert!(first.at <= second.at);
        let Name::Text(start, len) = first.name else { panic!("{:?}", first.name) };
        assert_eq!(batch.text((start, len)), "conv1");
        let Some(Args::Text(start, len)) = first.args else { panic!("{:?}", first.args) };
        assert_eq!(batch.text((start, len)), r#"{"a":"1"}"#);
        assert_eq!(second.name, Name::Step(4));
        assert!(batches.take(7, Some(id)).is_empty(), "a batch is taken once");
    }

    #[test]
    fn a_flush_takes_what_no_announcement_will_and_leaves_a_later_segment_alone() {
        let batches = Batches::default();
        let hand = |segment, announced| {
            batches.record(1, segment, 5, SPAN, NameSource::Static, None, Ph::Begin);
            batches.hand_over(1, segment, announced).unwrap().0
        };
        // The thread's first batch is announced: until the writer reads that line, its tid is
        // unknown, and a flush takes nothing of it.
        assert!(batches.needs_announcing(5, true));
        let first = hand(1, true);
        let quiet = hand(1, false);
        assert!(batches.take(1, None).is_empty());
        batches.learn_tid(5, 3);
        assert_eq!(batches.tid_of(5), Some(3));
        assert!(!batches.needs_announcing(5, true), "known, at a step");
        assert!(batches.needs_announcing(5, false), "inside a step (a full buffer)");
        assert!(batches.needs_announcing(6, true), "another thread");
        // A flush stops at an announced batch; its announcement takes what is before it.
        assert!(batches.take(1, None).is_empty());
        let ids: Vec<u64> = batches.take(1, Some(first)).iter().map(|b| b.id).collect();
        assert_eq!(ids, [first]);
        let later = hand(2, false);
        let ids: Vec<u64> = batches.take(1, None).iter().map(|b| b.id).collect();
        assert_eq!(ids, [quiet], "the next segment's batch stays");
        assert_eq!(batches.queued(), 1);
        let ids: Vec<u64> = batches.take(2, None).iter().map(|b| b.id).collect();
        assert_eq!(ids, [later]);
        assert_eq!(batches.queued(), 0, "taken batches leave the count");
        // Many small batches reach the bound on batches long before the one on records; past
        // half of it, even a step's batch is announced.
        for _ in 0..=QUEUE_BATCHES / 2 {
            hand(2, false);
        }
        assert!(batches.over(2) && !batches.over(1));
        assert!(batches.needs_announcing(5, true));
    }

    #[test]
    fn a_full_buffer_says_so() {
        let batches = Batches::default();
        let full = (0..MAX_RECORDS).map(|_| batches.record(2, 1, 1, SPAN, NameSource::Static, None, Ph::Instant));
        assert_eq!(full.filter(|full| *full).count(), 1);
        let (id, _) = batches.hand_over(2, 1, true).unwrap();
        assert_eq!(batches.take(1, Some(id))[0].records.len(), MAX_RECORDS);
    }

    #[test]
    fn the_announcement_carries_the_id_as_its_message() {
        struct Message(Option<String>);
        impl tracing_core::field::Visit for Message {
            fn record_debug(&mut self, field: &tracing_core::Field, value: &dyn std::fmt::Debug) {
                if field.name() == "message" {
                    self.0 = Some(format!("{value:?}"));
                }
            }
        }
        let mut seen = None;
        announce(42, |event| {
            assert_eq!(event.metadata().target(), BATCH_TARGET);
            let mut message = Message(None);
            event.record(&mut message);
            seen = message.0;
        });
        assert_eq!(seen.as_deref(), Some("42"));
    }
}
