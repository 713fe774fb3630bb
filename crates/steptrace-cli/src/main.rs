//! The `steptrace` command line: a thin layer over the libraries.

mod args;
mod cmd;
mod convert;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    // Mesa's Vulkan device-selection layer complains on headless machines
    // ("XDG_RUNTIME_DIR is invalid"); it selects nothing we need.
    if std::env::var_os("NODEVICE_SELECT").is_none() {
        std::env::set_var("NODEVICE_SELECT", "1");
    }
    let cli = args::Cli::parse();
    let result = match cli.command {
        args::Command::Train(a) => cmd::train::run(a),
        args::Command::Backends => cmd::backends::run(),
        args::Command::Report(a) => cmd::report::run(a),
        args::Command::Inspect(a) => cmd::inspect::run(a),
        args::Command::Bench(a) => cmd::bench::run(a),
        args::Command::Compare(a) => cmd::compare::run(a),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("steptrace: error: {err:#}");
            ExitCode::from(1)
        }
    }
}
