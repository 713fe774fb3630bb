//! The `metadata` object of a finished trace, and the header of a partial
//! one.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::device::DeviceActivity;
use super::distributed::DistributedInfo;
use super::manifest::Manifest;
use super::version::{check_version, FormatVersion, VersionError};

/// The `metadata` object of a steptrace trace file.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct TraceMetadata {
    /// The steptrace version that wrote the file.
    pub steptrace_version: String,
    /// The format tag, `steptrace-chrome-trace/1` (see
    /// [`FormatVersion`]).
    pub format: String,
    /// The writer's operating system.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_os: Option<String>,
    /// The writer's processor architecture.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_arch: Option<String>,
    /// The process's name in file names and traces.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker: Option<String>,
    /// The rank the file belongs to, in a run of several (also written
    /// as the file's top-level `distributedInfo`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub distributed: Option<DistributedInfo>,
    /// The schedule cycle the file covers, from 0.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cycle: Option<u64>,
    /// The schedule.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schedule: Option<ScheduleInfo>,
    /// The recorded steps (`N` of `ProfilerStep#N`).
    pub steps: Vec<u64>,
    /// The steps a whole cycle would have held: `count` steps from
    /// `first` (a range, so that a window of a billion steps costs two
    /// numbers).
    pub expected_steps: StepRange,
    /// Whether the cycle was cut short.
    pub partial: bool,
    /// Why it was cut short.
    pub partial_reason: Option<String>,
    /// The window, in trace time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window_us: Option<WindowUs>,
    /// The trace clock.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clock: Option<ClockInfo>,
    /// The `tracing` target directives that were kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub targets: Option<String>,
    /// Spans cut at a window edge.
    pub clipped_spans: u64,
    /// Lines of the partial file that did not parse (a cut-off last line).
    pub dropped_lines: u64,
    /// Events lost because their thread was bound to another sink.
    pub lost_events_other_sink: u64,
    /// Whether emitting threads waited for the writer thread during the
    /// window (absent in files written before steptrace bounded its
    /// channel).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub writer_waits: Option<WriterWaits>,
    /// Labels that look like secrets, private paths or input content.
    pub label_warnings: Vec<String>,
    /// How the run was made.
    pub manifest: Manifest,
    /// What was collected of the device, or why nothing was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_activity: Option<DeviceActivity>,
    /// Every other field.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// How often, and how long, emitting threads waited for the writer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriterWaits {
    /// Events whose thread waited.
    pub waits: u64,
    /// Their total wait, in µs.
    pub waited_us: u64,
    /// The bound on events in flight.
    pub cap: u64,
}

impl WriterWaits {
    /// The waits since `start`.
    pub fn since(self, start: WriterWaits) -> WriterWaits {
        WriterWaits {
            waits: self.waits.saturating_sub(start.waits),
            waited_us: self.waited_us.saturating_sub(start.waited_us),
            cap: self.cap,
        }
    }
}

/// `count` consecutive steps from `first`.
///
/// Written as `{"first": 12, "count": 3}`; files of the first round wrote the
/// list of steps (`[12, 13, 14]`), which reads as the same range.
///
/// ```
/// use steptrace::format::StepRange;
///
/// let old: StepRange = serde_json::from_str("[12, 13, 14]")?;
/// let new: StepRange = serde_json::from_str(r#"{"first": 12, "count": 3}"#)?;
/// assert_eq!(old, new);
/// assert!(new.contains(14) && !new.contains(15));
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "StepRangeRepr")]
pub struct StepRange {
    /// The first step.
    pub first: u64,
    /// How many steps.
    pub count: u64,
}

impl StepRange {
    /// `count` steps from `first`.
    #[must_use]
    pub fn new(first: u64, count: u64) -> StepRange {
        StepRange { first, count }
    }

    /// Whether `step` lies in the range.
    #[must_use]
    pub fn contains(&self, step: u64) -> bool {
        step >= self.first && step - self.first < self.count
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum StepRangeRepr {
    Range { first: u64, count: u64 },
    List(Vec<u64>),
}

impl TryFrom<StepRangeRepr> for StepRange {
    type Error = String;

    fn try_from(repr: StepRangeRepr) -> Result<StepRange, String> {
        match repr {
            StepRangeRepr::Range { first, count } => Ok(StepRange { first, count }),
            StepRangeRepr::List(list) => {
                let first = list.first().copied().unwrap_or(0);
                if list.iter().enumerate().any(|(i, &s)| first.checked_add(i as u64) != Some(s)) {
                    return Err("expected_steps is not a run of consecutive steps".to_owned());
                }
                Ok(StepRange { first, count: list.len() as u64 })
            }
        }
    }
}

/// The schedule, as text and as numbers.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct ScheduleInfo {
    /// `skip_first=…,wait=…,…`, as the schedule prints itself.
    pub text: String,
    /// Steps skipped before the first cycle.
    pub skip_first: u64,
    /// Wait steps per cycle.
    pub wait: u64,
    /// Warmup steps per cycle.
    pub warmup: u64,
    /// Active (recorded) steps per cycle.
    pub active: u64,
    /// Cycles (0: no limit).
    pub repeat: u64,
    /// Whether the first cycle skips its wait.
    pub skip_first_wait: bool,
}

/// A window in trace time, µs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct WindowUs {
    /// The first recorded step's start.
    pub start: f64,
    /// The last recorded step's end.
    pub end: f64,
}

impl WindowUs {
    /// A window from `start` to `end`, µs.
    #[must_use]
    pub fn new(start: f64, end: f64) -> WindowUs {
        WindowUs { start, end }
    }
}

/// The trace clock: `ts` is in µs from a point in Unix time.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct ClockInfo {
    /// Always `us`.
    pub ts_unit: String,
    /// Unix time (ms) of the run's time 0: cycles of one run, and the
    /// ranks of one process, share it.
    pub epoch_unix_ms: u64,
    /// µs from the run's time 0 to this file's trace time 0, where ranks
    /// of one process share `epoch_unix_ms` (each rank's clock starts
    /// when its layer is built): add it to a `ts` to compare ranks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offset_us: Option<f64>,
}

impl ClockInfo {
    /// A µs clock from `epoch_unix_ms`.
    #[must_use]
    pub fn us_since(epoch_unix_ms: u64) -> ClockInfo {
        ClockInfo { ts_unit: "us".into(), epoch_unix_ms, offset_us: None }
    }
}

/// The arguments of the [`meta::SEGMENT`](super::names::meta::SEGMENT)
/// event that heads a partial file: what a crash leaves behind still says
/// what it is.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct SegmentHeader {
    /// The format tag (absent in files of the first round).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    /// The process's name.
    pub worker: String,
    /// The cycle.
    pub cycle: u64,
    /// The schedule, as text.
    pub schedule: String,
    /// Unix time (ms) of trace time 0.
    pub epoch_unix_ms: u64,
    /// The rank, in a run of several.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub distributed: Option<DistributedInfo>,
    /// The steptrace version.
    pub steptrace_version: String,
    /// How the run was made (as known when the cycle opened).
    pub manifest: Manifest,
}

/// What steptrace wrote into a file, as far as the file holds it.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct Steptrace {
    /// The `metadata` object of a finished file.
    pub metadata: Option<TraceMetadata>,
    /// The header event of a partial file (also kept in finished files of
    /// older versions).
    pub header: Option<SegmentHeader>,
}

/// A steptrace part of a file that does not read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MetadataError {
    /// The file's format version cannot be read by this crate.
    #[error(transparent)]
    Version(#[from] VersionError),
    /// A field does not have the type the format gives it.
    #[error("the steptrace {what} does not match format {}: {source}", FormatVersion::CURRENT)]
    Shape {
        /// `metadata` or `segment header`.
        what: &'static str,
        /// The type mismatch.
        #[source]
        source: serde_json::Error,
    },
}

impl Steptrace {
    /// Reads steptrace's part of a file: the top-level `metadata` object
    /// (when its `format` is steptrace's) and the partial-file header's
    /// arguments. `Ok(None)` for a foreign trace.
    ///
    /// # Errors
    ///
    /// A newer or unreadable format version, or a known field of the wrong
    /// type.
    pub fn from_parts(
        metadata: Option<&Value>,
        header_args: Option<&Value>,
    ) -> Result<Option<Steptrace>, MetadataError> {
        let tag = |v: &Value| v.get("format").and_then(Value::as_str).map(str::to_owned);
        let metadata = match metadata.filter(|m| tag(m).is_some_and(|t| t.starts_with("steptrace"))) {
            Some(value) => {
                check_version(&tag(value).unwrap_or_default())?;
                Some(
                    TraceMetadata::deserialize(value)
                        .map_err(|source| MetadataError::Shape { what: "metadata", source })?,
                )
            }
            None => None,
        };
        let header = match header_args {
            Some(value) => {
                if let Some(t) = tag(value) {
                    check_version(&t)?;
                }
                Some(
                    SegmentHeader::deserialize(value)
                        .map_err(|source| MetadataError::Shape { what: "segment header", source })?,
                )
            }
            None => None,
        };
        Ok((metadata.is_some() || header.is_some()).then_some(Steptrace { metadata, header }))
    }

    /// The manifest: the finished file's, else the partial header's.
    #[must_use]
    pub fn manifest(&self) -> Option<&Manifest> {
        self.metadata.as_ref().map(|m| &m.manifest).or(self.header.as_ref().map(|h| &h.manifest))
    }

    /// The cycle.
    #[must_use]
    pub fn cycle(&self) -> Option<u64> {
        self.metadata.as_ref().and_then(|m| m.cycle).or(self.header.as_ref().map(|h| h.cycle))
    }

    /// The rank, in a run of several.
    #[must_use]
    pub fn distributed(&self) -> Option<&DistributedInfo> {
        self.metadata
            .as_ref()
            .and_then(|m| m.distributed.as_ref())
            .or(self.header.as_ref().and_then(|h| h.distributed.as_ref()))
    }

    /// Unix time (ms) of trace time 0.
    #[must_use]
    pub fn epoch_unix_ms(&self) -> Option<u64> {
        self.metadata
            .as_ref()
            .and_then(|m| m.clock.as_ref().map(|c| c.epoch_unix_ms))
            .or(self.header.as_ref().map(|h| h.epoch_unix_ms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn metadata_reads_checks_its_version_and_keeps_unknown_keys() {
        let meta = json!({
            "format": "steptrace-chrome-trace/1", "steptrace_version": "0.1.0", "cycle": 2,
            "steps": [12, 13], "partial": false, "partial_reason": null,
            "clock": {"ts_unit": "us", "epoch_unix_ms": 17},
            "manifest": {"model": "mlp"}, "custom": {"x": 1}
        });
        let st = Steptrace::from_parts(Some(&meta), None).unwrap().unwrap();
        let m = st.metadata.as_ref().unwrap();
        assert_eq!((m.cycle, m.steps.as_slice()), (Some(2), &[12, 13][..]));
        assert_eq!(st.epoch_unix_ms(), Some(17));
        assert_eq!(st.manifest().and_then(|m| m.model.as_deref()), Some("mlp"));
        assert_eq!(m.extra["custom"]["x"], 1);

        let newer = json!({"format": "steptrace-chrome-trace/9", "steps": "whatever"});
        let err = Steptrace::from_parts(Some(&newer), None).unwrap_err();
        assert!(err.to_string().contains("steptrace-chrome-trace/9"), "{err}");

        let wrong = json!({"format": "steptrace-chrome-trace/1", "steps": "twelve"});
        assert!(matches!(Steptrace::from_parts(Some(&wrong), None), Err(MetadataError::Shape { .. })));

        let foreign = json!({"format": "kineto", "steps": "twelve"});
        assert!(Steptrace::from_parts(Some(&foreign), None).unwrap().is_none());
    }

    #[test]
    fn a_partial_header_gives_the_manifest_and_cycle() {
        let header = json!({"worker": "w", "cycle": 1, "schedule": "active=2", "epoch_unix_ms": 5,
                            "steptrace_version": "0.1.0", "manifest": {"batch_size": 8}});
        let st = Steptrace::from_parts(None, Some(&header)).unwrap().unwrap();
        assert_eq!(st.cycle(), Some(1));
        assert_eq!(st.manifest().and_then(|m| m.batch_size), Some(8));
    }
}
