//! Running the `steptrace` binary as a user would.
#![allow(dead_code)]

use std::process::{Command, Output};

pub fn steptrace(args: &[&str], dir: &std::path::Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_steptrace"))
        .args(args)
        .current_dir(dir)
        .env("NODEVICE_SELECT", "1")
        .output()
        .expect("run steptrace")
}

/// `steptrace ARGS` started in `dir`, its output piped, not waited for.
pub fn spawn(args: &[&str], dir: &std::path::Path) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_steptrace"))
        .args(args)
        .current_dir(dir)
        .env("NODEVICE_SELECT", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start steptrace")
}

pub fn text(out: &Output) -> (String, String) {
    (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// `text` with every run of white space (a wrapped console line's break and indentation)
/// as one space: prose assertions then hold however the console wrapped it.
pub fn flat(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

pub fn cuda_available(dir: &std::path::Path) -> bool {
    let (stdout, _) = text(&steptrace(&["backends"], dir));
    stdout.lines().any(|l| l.contains("cuda") && l.contains("yes"))
}
