//! What one collection window returns.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use crate::clock::{ClockMap, ClockPair};
use crate::error::CuptiError;
use crate::records::{Kernel, Launch, Memcpy, Memset, Synchronization};

/// Where a collector's launch records come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LaunchSource {
    /// Launch records were not asked for.
    Off,
    /// CUPTI's callback API, for the launch callback ids only.
    Callback,
    /// The `DRIVER` activity kind, filtered to launches as records are read.
    DriverActivity,
    /// Asked for but not available (for example another CUPTI client holds the callback
    /// API); kernels, copies and memsets are still collected.
    Unavailable(CuptiError),
}

/// Everything collected between [`Collector::enable`](crate::Collector::enable) and
/// [`Collector::disable_and_flush`](crate::Collector::disable_and_flush). Each list is
/// sorted by start time.
#[derive(Debug, Clone)]
pub struct Window {
    /// Kernel executions.
    pub kernels: Vec<Kernel>,
    /// Memory copies.
    pub memcpys: Vec<Memcpy>,
    /// Memsets.
    pub memsets: Vec<Memset>,
    /// Host launch calls (see [`Window::launch_source`]).
    pub launches: Vec<Launch>,
    /// Host waits on the device.
    pub synchronizations: Vec<Synchronization>,
    /// Records CUPTI dropped in this window for lack of buffer space
    /// (`cuptiActivityGetNumDroppedRecords`, summed over the window's buffers).
    pub dropped_records: u64,
    /// Records whose work had not finished at the flush (zero or reversed timestamps):
    /// synchronise the device before closing a window to avoid them.
    pub incomplete_records: u64,
    /// Records of kinds not asked for, and driver calls that are not launches.
    pub ignored_records: u64,
    /// Clocks read when the window opened.
    pub open: ClockPair,
    /// Clocks read when the window closed.
    pub close: ClockPair,
    /// Where [`Window::launches`] came from in this window.
    pub launch_source: LaunchSource,
    /// Non-fatal failures during the window (a kind that could not be disabled, a launch
    /// callback that could not be enabled, ...).
    pub problems: Vec<CuptiError>,
    /// Records that arrived while no window was open, or (with
    /// [`keep_enabled`](crate::CollectorConfig::keep_enabled)) of work that ran before this
    /// window opened: discarded.
    pub outside_records: u64,
    /// What opening the window took on the calling thread, by part (`clocks`, `reserve`,
    /// `activity kinds`, `launch callbacks`; a kept collector's `kept open`).
    pub open_cost: Vec<(&'static str, Duration)>,
    /// What closing it took, by part (`disable`, `flush`, `take`).
    pub close_cost: Vec<(&'static str, Duration)>,
}

impl Window {
    /// The CUPTI-to-host clock map fitted through [`Window::open`] and [`Window::close`].
    pub fn clock_map(&self) -> ClockMap {
        ClockMap::fit(self.open, self.close)
    }

    /// Launches by correlation id.
    pub fn launches_by_correlation(&self) -> HashMap<u32, &Launch> {
        self.launches.iter().map(|l| (l.correlation_id, l)).collect()
    }

    /// How many kernels have a launch record with the same correlation id.
    pub fn kernels_with_launch(&self) -> usize {
        let ids: HashSet<u32> = self.launches.iter().map(|l| l.correlation_id).collect();
        self.kernels.iter().filter(|k| ids.contains(&k.correlation_id)).count()
    }

    /// Number of distinct kernel names.
    pub fn distinct_kernel_names(&self) -> usize {
        let names: HashSet<&Arc<str>> = self.kernels.iter().map(|k| &k.name).collect();
        names.len()
    }

    /// Sorts every list by start time.
    pub(crate) fn sort(&mut self) {
        self.kernels.sort_by_key(|k| k.start_ns);
        self.memcpys.sort_by_key(|m| m.start_ns);
        self.memsets.sort_by_key(|m| m.start_ns);
        self.launches.sort_by_key(|l| l.start_ns);
        self.synchronizations.sort_by_key(|s| s.start_ns);
    }
}

/// Names OS threads from `/proc/self/task/<tid>/comm` (DRIVER activity records carry only
/// the thread id). Threads that are gone keep `None`.
pub(crate) fn name_os_threads(launches: &mut [Launch]) {
    let mut names: HashMap<u64, Option<Arc<str>>> = HashMap::new();
    for launch in launches {
        let name = names.entry(launch.thread.id).or_insert_with(|| {
            let comm = std::fs::read_to_string(format!("/proc/self/task/{}/comm", launch.thread.id));
            comm.ok().map(|s| Arc::from(s.trim_end()))
        });
        launch.thread.name = name.clone();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::HostThread;
    use std::time::{Duration, Instant};

    fn kernel(corr: u32, start: u64, name: &Arc<str>) -> Kernel {
        Kernel {
            start_ns: start,
            end_ns: start + 10,
            device_id: 0,
            context_id: 1,
            stream_id: 7,
            correlation_id: corr,
            name: Arc::clone(name),
            grid: [1, 1, 1],
            block: [32, 1, 1],
            registers_per_thread: 8,
            static_shared_bytes: 0,
            dynamic_shared_bytes: 0,
        }
    }

    fn launch(corr: u32, start: u64, tid: u64) -> Launch {
        Launch {
            start_ns: start,
            end_ns: start + 3,
            correlation_id: corr,
            cbid: 307,
            name: "cuLaunchKernel",
            thread: HostThread { id: tid, name: None },
        }
    }

    fn window(kernels: Vec<Kernel>, launches: Vec<Launch>) -> Window {
        let t0 = Instant::now();
        Window {
            kernels,
            memcpys: vec![],
            memsets: vec![],
            launches,
            synchronizations: vec![],
            dropped_records: 0,
            incomplete_records: 0,
            ignored_records: 0,
            open: ClockPair::new(t0, 1_000, Duration::from_nanos(40)),
            close: ClockPair::new(t0 + Duration::from_millis(10), 10_001_000, Duration::from_nanos(40)),
            launch_source: LaunchSource::Callback,
            problems: vec![],
            outside_records: 0,
            open_cost: vec![],
            close_cost: vec![],
        }
    }

    #[test]
    fn a_kept_window_discards_what_ran_before_it_opened() {
        let name: Arc<str> = Arc::from("k");
        let mut records = crate::parse::Records {
            kernels: vec![kernel(1, 900, &name), kernel(2, 1_000, &name), kernel(3, 5_000, &name)],
            launches: vec![launch(1, 890, 5), launch(2, 995, 5), launch(3, 4_990, 5)],
            ..Default::default()
        };
        // Kernel 2's launch came before the window opened at 1,000 ns, its run after: the
        // run is kept and the launch is not (the window never saw it).
        assert_eq!(records.discard_before(1_000), 3);
        assert_eq!(records.kernels.iter().map(|k| k.correlation_id).collect::<Vec<_>>(), [2, 3]);
        assert_eq!(records.launches.iter().map(|l| l.correlation_id).collect::<Vec<_>>(), [3]);
        assert_eq!(records.discard_before(0), 0);
    }

    #[test]
    fn kernels_are_matched_to_launches_by_correlation() {
        let a: Arc<str> = Arc::from("a");
        let b: Arc<str> = Arc::from("b");
        let mut w = window(
            vec![kernel(3, 300, &a), kernel(1, 100, &b), kernel(2, 200, &a)],
            vec![launch(1, 90, 1), launch(3, 290, 1), launch(99, 5, 1)],
        );
        assert_eq!(w.kernels_with_launch(), 2);
        assert_eq!(w.distinct_kernel_names(), 2);
        assert_eq!(w.launches_by_correlation()[&3].start_ns, 290);
        w.sort();
        let order: Vec<u32> = w.kernels.iter().map(|k| k.correlation_id).collect();
        assert_eq!(order, [1, 2, 3]);
        assert_eq!(w.launches[0].correlation_id, 99);
        assert!(w.clock_map().is_fitted());
        assert!(w.clock_map().drift_ppm().abs() < 1.0);
    }

    #[test]
    fn os_threads_are_named_from_proc() {
        // This thread's OS id is not exposed by std; the main thread's tid is the pid.
        let pid = u64::from(std::process::id());
        let mut launches = vec![launch(1, 0, pid), launch(2, 0, u64::from(u32::MAX))];
        name_os_threads(&mut launches);
        let expected = std::fs::read_to_string(format!("/proc/self/task/{pid}/comm")).unwrap();
        assert_eq!(launches[0].thread.name.as_deref(), Some(expected.trim_end()));
        assert_eq!(launches[1].thread.name, None, "no such thread");
    }
}
