//! The `steptrace` command line: a thin layer over the libraries.

mod args;
mod cmd;
mod console;
mod convert;
#[cfg(test)]
mod reference;

use std::process::ExitCode;

use clap::Parser;

/// The system's allocator, which reports a CPU-backend step's failed allocation as an
/// out-of-memory before failing ([`steptrace_burn::failure::host_oom`]).
#[global_allocator]
static ALLOCATOR: steptrace_burn::failure::host_oom::Allocator = steptrace_burn::failure::host_oom::Allocator;

fn main() -> ExitCode {
    // A run writes its traces and results whatever becomes of its console; a reader's
    // output is all it has.
    let keeps_going = std::env::args_os().nth(1).is_some_and(|a| a == "train" || a == "bench");
    if !keeps_going {
        closed_stdout_ends_quietly();
    }
    // Mesa's Vulkan device-selection layer complains on headless machines
    // ("XDG_RUNTIME_DIR is invalid"); it selects nothing we need.
    if std::env::var_os("NODEVICE_SELECT").is_none() {
        std::env::set_var("NODEVICE_SELECT", "1");
    }
    // `train` catches Ctrl-C and SIGTERM (the first ends the run after the current step).
    // The handlers go in before anything else, argument parsing included, so that a signal
    // in the run's first milliseconds is kept (the flag remembers it) rather than lost.
    let early = std::env::args_os().nth(1).is_some_and(|a| a == "train").then(steptrace_burn::signals::install);
    let cli = args::Cli::parse();
    let result = match cli.command {
        args::Command::Train(a) => cmd::train::run(a, early),
        args::Command::Backends => cmd::backends::run(),
        args::Command::Report(a) => cmd::report::run(a),
        args::Command::Inspect(a) => cmd::inspect::run(a),
        args::Command::Bench(a) => cmd::bench::run(a),
        args::Command::Compare(a) => cmd::compare::run(a),
        args::Command::Capture(a) => cmd::capture::run(a),
        args::Command::Peaks(a) => cmd::peaks::run(a),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("steptrace: error: {}", render(&err));
            ExitCode::from(1)
        }
    }
}

/// A write to a closed pipe (`steptrace inspect T | head -1`) ends the process as the
/// shell expects of a command line tool: killed by SIGPIPE (status 141 in a shell), without
/// a message. Rust ignores SIGPIPE, so that such a write fails instead, and every print
/// would then panic. `train` and `bench` do not take this path: killed mid-run they would
/// lose the cycle in progress or the result file, so their console lines are written
/// without a panic on a closed stdout and dropped, and the run goes on to write its files.
#[cfg(unix)]
fn closed_stdout_ends_quietly() {
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;
    // Registered with signal-hook: its handler runs the default action (the workspace
    // forbids the unsafe code that would restore SIG_DFL directly). Child processes
    // start with the default action either way.
    let _ =
        signal_hook::flag::register_conditional_default(signal_hook::consts::SIGPIPE, Arc::new(AtomicBool::new(true)));
}

#[cfg(not(unix))]
fn closed_stdout_ends_quietly() {}

/// The error and its causes, joined by ": ", each cause once: many of our
/// errors already quote their source in their message, and anyhow's `{:#}`
/// would print it again.
fn render(err: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in err.chain() {
        let part = cause.to_string();
        if text.contains(&part) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&part);
    }
    text
}

#[cfg(test)]
mod tests {
    use std::io;

    #[derive(Debug, thiserror::Error)]
    #[error("reading x failed: {source}")]
    struct Quoting {
        #[source]
        source: io::Error,
    }

    #[test]
    fn a_cause_already_in_the_message_is_printed_once() {
        let inner = io::Error::new(io::ErrorKind::NotFound, "No such file or directory (os error 2)");
        let err = anyhow::Error::new(Quoting { source: inner }).context("cannot open the trace");
        assert_eq!(
            super::render(&err),
            "cannot open the trace: reading x failed: No such file or directory (os error 2)"
        );
        let plain = anyhow::anyhow!(io::Error::other("disk full")).context("writing");
        assert_eq!(super::render(&plain), "writing: disk full");
    }
}
