//! What the kernel events of one file cannot be, and what the figures do about it.
//!
//! - A kernel written twice: the same device, stream, name, start and duration, or the same
//!   correlation id and name (a copy under a new id or at a new time). The copies are left
//!   out of every figure; the first is kept.
//! - Two different kernels with the correlation id of one single-kernel launch
//!   (`cudaLaunchKernel` runs one kernel; a graph launch runs many, and is not questioned).
//!   Correlation ids are read so only where the trace holds the launch they name: a writer
//!   without launches may number its kernels as it likes.
//! - Kernels that overlap on one stream: a CUDA stream runs its kernels one at a time, so a
//!   kernel that starts before the previous one on its stream ended cannot be as written. It
//!   is kept, marked, and the kernel figures say they rest on inconsistent input.
//! - A kernel that starts before the call that launched it: its launch-to-start time would
//!   be negative. It is kept, marked, and left out of the launch-to-start figures.
//!
//! Kernels whose launch is a graph launch are not checked for overlaps either: the nodes of
//! a CUDA graph may run side by side on the stream the graph was launched into. Nor are
//! kernels timed otherwise than by CUPTI (`args.timing`: timestamp queries), whose
//! "stream" is no CUDA stream.

use std::collections::{HashMap, HashSet};

use super::events::{DeviceId, Launch, StreamId, Work, WorkKind};

/// How far two intervals may seem to overlap, or a kernel to precede its launch, through
/// the rounding of timestamps alone, µs.
pub(crate) const SLACK_US: f64 = 0.1;

/// One kernel event, to name in a warning.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Example {
    /// Its name, as written.
    pub(crate) name: String,
    /// Its start, µs.
    pub(crate) ts: f64,
}

/// A kind of impossible event: how many, and the first.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Found {
    pub(crate) count: usize,
    pub(crate) first: Option<Example>,
}

impl Found {
    fn add(&mut self, w: &Work) {
        self.count += 1;
        if self.first.is_none() {
            self.first = Some(Example { name: w.name.to_string(), ts: w.start });
        }
    }
}

/// What cannot be in the kernel events of one file.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct DeviceIssues {
    /// Kernel events that repeat an earlier one: left out.
    pub(crate) repeated: Found,
    /// Kernels that carry the correlation id of a single-kernel launch another kernel
    /// already carries: kept, marked.
    pub(crate) shared_correlation: Found,
    /// Kernels that start before the previous kernel on their stream ended: kept, marked.
    pub(crate) overlapping: Found,
    /// Streams holding such kernels.
    pub(crate) overlapping_streams: usize,
    /// Kernels that start before their launch call: kept, left out of launch-to-start.
    pub(crate) before_launch: Found,
    /// The most negative launch-to-start time among them, µs.
    pub(crate) earliest_us: f64,
}

impl DeviceIssues {
    /// Whether anything was found.
    pub(crate) fn any(&self) -> bool {
        self.repeated.count + self.shared_correlation.count + self.overlapping.count + self.before_launch.count > 0
    }
}

/// Leaves the copies out of `work` (ordered by start), marks the kernels that cannot be as
/// written, and says what was found. `graphs` holds the correlation ids of graph launches.
pub(crate) fn sift(work: &mut Vec<Work>, launches: &HashMap<u64, Launch>, graphs: &HashSet<u64>) -> DeviceIssues {
    let mut issues = DeviceIssues::default();
    // A copy: the same event written again, or again under the same launch.
    // Keyed by reference: one pointer per kernel, not a copy of its ids.
    let mut written: HashSet<Written<'_>> = HashSet::new();
    let mut by_correlation: HashMap<(&DeviceId, u64), &str> = HashMap::new();
    let mut repeated = vec![false; work.len()];
    let mut shared = vec![false; work.len()];
    for (i, w) in work.iter().enumerate().filter(|(_, w)| w.kind == WorkKind::Kernel) {
        if !written.insert(Written(w)) {
            repeated[i] = true;
            continue;
        }
        let Some(c) = w.correlation.filter(|c| launches.contains_key(c)) else { continue };
        match by_correlation.get(&(&w.device, c)) {
            Some(name) if *name == w.name => repeated[i] = true,
            Some(_) => shared[i] = true,
            None => {
                by_correlation.insert((&w.device, c), w.name.as_str());
            }
        }
    }
    for (i, w) in work.iter().enumerate() {
        if repeated[i] {
            issues.repeated.add(w);
        } else if shared[i] {
            issues.shared_correlation.add(w);
        }
    }
    let mut i = 0;
    work.retain(|_| {
        i += 1;
        !repeated[i - 1]
    });
    // Overlaps on one stream, in order of start.
    let mut stream_end: HashMap<(DeviceId, StreamId), f64> = HashMap::new();
    let mut streams: HashSet<(DeviceId, StreamId)> = HashSet::new();
    for w in work.iter_mut().filter(|w| w.kind == WorkKind::Kernel) {
        if let Some(launch) = w.correlation.and_then(|c| launches.get(&c)).filter(|l| before_its_launch(w, l)) {
            issues.before_launch.add(w);
            issues.earliest_us = issues.earliest_us.min(w.start - launch.start);
        }
        let from_graph = w.correlation.is_some_and(|c| graphs.contains(&c));
        let timed_otherwise = w.attributed.as_ref().is_some_and(|a| a.timing.is_some());
        let Some(stream) = w.stream.clone().filter(|_| !from_graph && !timed_otherwise) else { continue };
        let key = (w.device.clone(), stream);
        let end = stream_end.entry(key.clone()).or_insert(f64::NEG_INFINITY);
        if w.start < *end - SLACK_US {
            w.inconsistent = true;
            issues.overlapping.add(w);
            streams.insert(key);
        }
        *end = end.max(w.end);
    }
    issues.overlapping_streams = streams.len();
    // Sharing a launch: both kernels are in question.
    if issues.shared_correlation.count > 0 {
        let mut count: HashMap<(DeviceId, u64), usize> = HashMap::new();
        for w in work.iter().filter(|w| w.kind == WorkKind::Kernel) {
            if let Some(c) = w.correlation.filter(|c| launches.contains_key(c)) {
                *count.entry((w.device.clone(), c)).or_default() += 1;
            }
        }
        for w in work.iter_mut().filter(|w| w.kind == WorkKind::Kernel) {
            if w.correlation.is_some_and(|c| count.get(&(w.device.clone(), c)).is_some_and(|n| *n > 1)) {
                w.inconsistent = true;
            }
        }
    }
    issues
}

/// A kernel as a copy of it would repeat it: the same device, stream, name, start and end.
struct Written<'a>(&'a Work);

impl Written<'_> {
    fn key(&self) -> (&DeviceId, &Option<StreamId>, &str, u64, u64) {
        let w = self.0;
        (&w.device, &w.stream, w.name.as_str(), w.start.to_bits(), w.end.to_bits())
    }
}

impl PartialEq for Written<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for Written<'_> {}

impl std::hash::Hash for Written<'_> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.key().hash(state);
    }
}

/// Whether a kernel started before the call that launched it.
pub(crate) fn before_its_launch(w: &Work, launch: &Launch) -> bool {
    w.start < launch.start - SLACK_US
}
