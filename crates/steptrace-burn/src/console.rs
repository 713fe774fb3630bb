//! What a session says on the console when asked to ([`Console`]): the lines `steptrace train`
//! prints, for any program, and the pieces a program that prints its own lines can reuse.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use steptrace::format::{ColdStart, Figure};
use steptrace::SavedTrace;

use crate::backend::{self, CacheState, Selection, StartupProgress};
use steptrace::terminal::{say, warn, WIDTH};

/// What a [`Session`](crate::Session) prints.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Console {
    /// Nothing.
    Off,
    /// The lines before the first step only: the backend (and a fallback's reason), the
    /// cubecl cache, the sync policy, device activity. For a program that prints the rest
    /// itself (`steptrace train` does).
    Start,
    /// Those lines; while step 0 runs, on a terminal, a live line of the cold start
    /// (kernels compiled, autotune keys decided); when it ends, the cold start itemised;
    /// at the end, each file written, and a failure's report.
    #[default]
    Full,
}

impl Console {
    pub(crate) fn start(self) -> bool {
        self != Console::Off
    }

    pub(crate) fn full(self) -> bool {
        self == Console::Full
    }
}

/// `text` with the fallback reason, which the console's first line printed in full, replaced
/// by a pointer to it: the reason can be hundreds of characters long and is said once on the
/// console (every trace and report still carries it whole).
pub fn said_above(text: &str, reason: Option<&str>) -> String {
    match reason {
        Some(reason) if !reason.is_empty() => text.replace(reason, "the reason on the first line"),
        _ => text.to_owned(),
    }
}

/// The backend lines: its label and, for a fallback, that the run is not on CUDA.
pub(crate) fn backend_lines(selection: &Selection) {
    say(&format!("backend: {}", selection.label()));
    if selection.is_fallback() {
        say(&format!(
            "NOTE: this run is NOT on CUDA: its timings describe {} and must not be read as a GPU analysis.",
            selection.kind
        ));
    }
}

/// The cubecl cache line.
pub(crate) fn cache_line(selection: &Selection, cache: &CacheState) {
    if selection.kind.uses_cubecl() {
        say(&format!(
            "cubecl cache: {} ({} files before this run; whether it is cold, partly warm or warm for this run is told after step 0, from what cubecl compiles and tunes); autotune level {} ({})",
            steptrace::settings::home_relative(&cache.dir),
            cache.files_before,
            cache.autotune_level,
            cache.autotune_level_source,
        ));
    } else {
        say(&format!("cubecl cache: {}", backend::BackendKind::NOT_CUBECL));
    }
}

/// The cold start, itemised, once step 0 has ended.
pub(crate) fn cold_start_lines(cold: Option<&Figure<ColdStart>>) {
    match cold {
        Some(Figure::Known(cold)) => {
            for line in cold.lines() {
                say(&format!("cold start: {line}"));
            }
        }
        Some(Figure::Absent(why)) => say(&format!("cold start: {why}")),
        None => {}
    }
}

/// One line per file written, then each file's label warnings and the errors, as a session
/// and `steptrace train` say them.
pub fn written_lines(traces: &[SavedTrace], errors: &[String]) {
    for trace in traces {
        say(&format!(
            "wrote {} (cycle {}, steps {}{})",
            trace.path.display(),
            trace.cycle,
            steps_text(&trace.steps),
            if trace.partial { ", PARTIAL" } else { "" }
        ));
    }
    for trace in traces {
        for warning in &trace.label_warnings {
            warn(&format!("steptrace: warning: {}: {warning}", trace.path.display()));
        }
    }
    for err in errors {
        say(&format!("trace error: {err}"));
    }
}

/// A list of steps for the console: short lists in full (`[12, 13, 14]`),
/// long runs of consecutive steps as a range with their count.
pub fn steps_text(steps: &[u64]) -> String {
    const SHOWN: usize = 8;
    let consecutive = steps.windows(2).all(|w| w[0].checked_add(1) == Some(w[1]));
    match steps {
        [] => "[]".to_owned(),
        _ if steps.len() <= SHOWN => format!("{steps:?}"),
        [first, .., last] if consecutive => format!("{first}..={last} ({} steps)", steps.len()),
        [first, second, .., last] => format!("[{first}, {second}, …, {last}] ({} steps)", steps.len()),
        _ => format!("{steps:?}"),
    }
}

/// `step 0 (cold start) 12.3 s: 31 kernels compiled (5 from cache); autotune: 3 keys
/// decided (2 from cache), tuning matmul-...`: the live line while step 0 runs.
pub fn startup_message(p: &StartupProgress) -> String {
    let mut line = format!("step 0 (cold start) {:.1} s: {} kernels compiled", p.elapsed_s, p.compiled);
    if p.compile_cache_hits > 0 {
        line.push_str(&format!(" ({} from cache)", p.compile_cache_hits));
    }
    line.push_str(&format!("; autotune: {} keys decided", p.tuned + p.tune_cache_hits));
    if p.tune_cache_hits > 0 {
        line.push_str(&format!(" ({} from cache)", p.tune_cache_hits));
    }
    if let Some(key) = &p.tuning {
        let key: String = key.chars().take(40).collect();
        line.push_str(&format!(", tuning {key}"));
    }
    line
}

/// While step 0 runs, a line on the terminal (stderr) that says what the cold start is doing,
/// redrawn four times a second from a thread of its own; nothing when stderr is not a
/// terminal.
pub(crate) struct LiveLine {
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl LiveLine {
    pub(crate) fn start() -> LiveLine {
        let done = Arc::new(AtomicBool::new(false));
        let thread = std::io::stderr()
            .is_terminal()
            .then(|| {
                let done = Arc::clone(&done);
                std::thread::Builder::new()
                    .name("steptrace-startup-line".into())
                    .spawn(move || {
                        let mut drawn = false;
                        while !done.load(Ordering::Relaxed) {
                            if let Some(progress) = backend::startup_progress() {
                                let text: String = startup_message(&progress).chars().take(WIDTH - 1).collect();
                                let _ = write!(std::io::stderr(), "\r{text}\x1b[K");
                                drawn = true;
                            }
                            std::thread::park_timeout(Duration::from_millis(250));
                        }
                        if drawn {
                            let _ = write!(std::io::stderr(), "\r\x1b[K");
                        }
                    })
                    .ok()
            })
            .flatten();
        LiveLine { done, thread }
    }

    /// Stops the line and clears it.
    pub(crate) fn stop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            let _ = thread.join();
        }
    }
}

impl Drop for LiveLine {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::{said_above, steps_text};

    #[test]
    fn the_fallback_reason_is_said_once() {
        let reason = "CUDA unavailable: libcuda.so not found; no GPU adapter for wgpu (CPU adapter only)";
        let label = format!("wgpu (FALLBACK: {reason}) on llvmpipe");
        assert_eq!(said_above(&label, Some(reason)), "wgpu (FALLBACK: the reason on the first line) on llvmpipe");
        assert_eq!(said_above(&label, None), label);
        assert_eq!(said_above("cuda on H200", Some("")), "cuda on H200");
    }

    #[test]
    fn long_step_lists_are_shortened_with_their_count() {
        assert_eq!(steps_text(&[12, 13, 14]), "[12, 13, 14]");
        assert_eq!(steps_text(&(1..=5364).collect::<Vec<_>>()), "1..=5364 (5364 steps)");
        let gaps: Vec<u64> = (0..20).map(|i| i * 2).collect();
        assert_eq!(steps_text(&gaps), "[0, 2, …, 38] (20 steps)");
        assert_eq!(steps_text(&[]), "[]");
    }
}
