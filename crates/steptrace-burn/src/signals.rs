//! Ctrl-C and SIGTERM: the first one ends the run after the current step
//! and saves the cycle in progress, cut short; a second one exits at once,
//! leaving the cycle's `.partial` file (which `report` and `inspect` read).
//!
//! A [`Session`](crate::Session) installs these handlers unless told not to
//! ([`SessionBuilder::signals`](crate::SessionBuilder::signals)); `steptrace train` installs
//! them before it parses its arguments and hands them to its session.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
#[cfg(unix)]
use std::time::Duration;

#[cfg(unix)]
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGXFSZ};
#[cfg(unix)]
use signal_hook::flag;

/// The signal flags of this process.
#[derive(Clone, Debug)]
pub struct Signals {
    /// The number of the first signal, 0 until then: the flag the training
    /// loop watches.
    pub stop: Arc<AtomicUsize>,
    announced: Arc<AtomicBool>,
    /// The handlers [`install`] registered, until [`uninstall`](Signals::uninstall).
    #[cfg(unix)]
    handlers: Arc<std::sync::Mutex<Vec<signal_hook::SigId>>>,
}

impl Signals {
    /// Flags set by handlers of the program's own (or by a test): `stop` holds the number of
    /// the first signal, 0 until then.
    pub fn from_flag(stop: Arc<AtomicUsize>) -> Signals {
        Signals {
            stop,
            announced: Arc::new(AtomicBool::new(true)),
            #[cfg(unix)]
            handlers: Arc::default(),
        }
    }

    /// Takes the handlers [`install`] registered away again: Ctrl-C, SIGTERM and SIGHUP do
    /// what they did before (a run that no longer watches the flag must not swallow them).
    /// Harmless when called twice, and for flags made by [`from_flag`](Signals::from_flag).
    pub fn uninstall(&self) {
        #[cfg(unix)]
        {
            let ids = std::mem::take(&mut *self.handlers.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
            for id in ids {
                signal_hook::low_level::unregister(id);
            }
            // The thread that announces a signal stops too.
            self.announced.store(true, Ordering::SeqCst);
        }
    }

    /// The first signal received, 0 for none.
    pub fn received(&self) -> usize {
        self.stop.load(Ordering::SeqCst)
    }

    /// Says, once, what the first signal does.
    pub fn announce(&self) {
        let signal = self.received();
        if signal != 0 && !self.announced.swap(true, Ordering::SeqCst) {
            eprintln!();
            steptrace::terminal::warn(&format!(
                "steptrace: {} ({}): finishing the current step and saving the cycle in progress (press Ctrl-C again to quit at once; the cycle is then left as a .partial file)",
                what(signal),
                signal_name(signal)
            ));
        }
    }
}

/// `SIGINT`, `SIGTERM`, `SIGHUP`, or `signal N`: how a run names the signal that stopped it.
pub fn signal_name(signal: usize) -> String {
    match signal {
        2 => "SIGINT".to_owned(),
        15 => "SIGTERM".to_owned(),
        1 => "SIGHUP".to_owned(),
        n => format!("signal {n}"),
    }
}

/// Installs nothing outside Unix.
#[cfg(not(unix))]
pub fn install() -> io::Result<Signals> {
    // Elsewhere Ctrl-C keeps its default: the run stops, and the cycle in
    // progress stays a `.partial` file that report and inspect read.
    Ok(Signals::from_flag(Arc::new(AtomicUsize::new(0))))
}

/// Installs the handlers: the first `SIGINT`, `SIGTERM` or `SIGHUP` sets [`Signals::stop`] (a
/// run ends after its current step); a second one exits at once with 128 + its number.
///
/// # Errors
///
/// When a handler cannot be registered, or the thread that says what a signal does cannot
/// start.
///
/// `SIGXFSZ` (a file-size limit, `ulimit -f`) is caught too, so that a write
/// past the limit fails with an error the run reports, instead of killing
/// the process without a word.
#[cfg(unix)]
pub fn install() -> io::Result<Signals> {
    let stop = Arc::new(AtomicUsize::new(0));
    let seen = Arc::new(AtomicBool::new(false));
    let mut ids = Vec::new();
    for signal in [SIGINT, SIGTERM, SIGHUP] {
        // Registered first, so it sees `seen` before this signal sets it:
        // only a second signal exits at once, with the conventional code.
        ids.push(flag::register_conditional_shutdown(signal, 128 + signal, Arc::clone(&seen))?);
        ids.push(flag::register(signal, Arc::clone(&seen))?);
        ids.push(flag::register_usize(signal, Arc::clone(&stop), signal as usize)?);
    }
    ids.push(flag::register(SIGXFSZ, Arc::new(AtomicBool::new(false)))?);
    let signals =
        Signals { stop, announced: Arc::new(AtomicBool::new(false)), handlers: Arc::new(std::sync::Mutex::new(ids)) };
    let watcher = signals.clone();
    // Says what is happening as soon as the signal arrives (the loop itself
    // notices only when the step ends, which can take a while on a cold
    // CUDA cache); the caller announces it too, in case the run ends first.
    // It stops once the signal is announced, or the handlers are taken away.
    std::thread::Builder::new().name("steptrace-signals".into()).spawn(move || loop {
        if watcher.received() != 0 {
            watcher.announce();
            return;
        }
        if watcher.announced.load(Ordering::SeqCst) {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    })?;
    Ok(signals)
}

/// The exit code of a run ended by `signal`: 128 + the signal number.
pub fn exit_code(signal: usize) -> u8 {
    u8::try_from(128 + signal).unwrap_or(u8::MAX)
}

fn what(signal: usize) -> &'static str {
    match signal {
        15 => "terminated",
        1 => "hung up",
        _ => "interrupted",
    }
}
