//! Running a chapter's commands as a reader types them.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::compare;
use super::parse::{Block, Chapter, Expect};

/// The longest one command may take before the chapter fails.
const COMMAND_LIMIT: Duration = Duration::from_secs(600);

/// Where the commands run.
pub struct Env {
    /// Holds `steptrace` (and the book's example programs): first on PATH.
    pub bin: PathBuf,
    /// HOME for every chapter of one test run (caches such as cubecl's go there).
    pub home: PathBuf,
}

/// One command's result.
struct Ran {
    code: Option<i32>,
    output: String,
}

fn run_one(env: &Env, dir: &Path, command: &str) -> Ran {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut paths = vec![env.bin.clone()];
    paths.extend(std::env::split_paths(&path));
    // cargo and rustup keep their own homes: a reader's HOME change would not move them.
    let real_home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default();
    let cargo_home = std::env::var_os("CARGO_HOME").map(PathBuf::from).unwrap_or(real_home.join(".cargo"));
    let rustup_home = std::env::var_os("RUSTUP_HOME").map(PathBuf::from).unwrap_or(real_home.join(".rustup"));
    // stdout and stderr into one pipe, in order, as a console shows them.
    let script = format!("{{\n{command}\n}} 2>&1");
    let out = Command::new("timeout")
        .arg(COMMAND_LIMIT.as_secs().to_string())
        .args(["bash", "-c", &script])
        .current_dir(dir)
        .env("PATH", std::env::join_paths(paths).expect("PATH"))
        .env("HOME", &env.home)
        .env("CARGO_HOME", cargo_home)
        .env("RUSTUP_HOME", rustup_home)
        .env("NODEVICE_SELECT", "1")
        .env_remove("XDG_CACHE_HOME")
        .env_remove("STEPTRACE_CACHE_DIR")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run bash");
    Ran { code: out.status.code(), output: String::from_utf8_lossy(&out.stdout).into_owned() }
}

/// Runs every block of `chapter` in `dir`, in order. Stops at the first failure, with a
/// message naming the chapter, the line, the command and what went wrong.
pub fn chapter(env: &Env, name: &str, chapter: &Chapter, dir: &Path) -> Result<(), String> {
    for block in &chapter.blocks {
        run_block(env, name, block, dir)?;
    }
    Ok(())
}

fn run_block(env: &Env, name: &str, block: &Block, dir: &Path) -> Result<(), String> {
    for (i, command) in block.commands.iter().enumerate() {
        let started = Instant::now();
        let ran = run_one(env, dir, command);
        let secs = started.elapsed().as_secs_f64();
        eprintln!("book: {name}:{}: {secs:.1} s: {command}", block.line);
        let fail = |what: String| {
            format!("{name}, block at line {}:\n$ {command}\n{what}\n--- output\n{}", block.line, ran.output)
        };
        match (block.expect, ran.code) {
            (_, Some(124)) | (_, None) => {
                return Err(fail(format!("did not finish within {} s (or was killed)", COMMAND_LIMIT.as_secs())))
            }
            (Expect::Success, Some(0)) => {}
            (Expect::Success, Some(code)) => return Err(fail(format!("exited with {code}, expected 0"))),
            (Expect::Failure(_), Some(0)) => {
                return Err(fail("exited with 0, but the block is marked `sh,fails`".to_owned()))
            }
            (Expect::Failure(Some(want)), Some(code)) if code != want => {
                return Err(fail(format!("exited with {code}, expected {want} (`sh,fails={want}`)")))
            }
            (Expect::Failure(_), Some(_)) => {}
        }
        let last = i + 1 == block.commands.len();
        if let (true, Some(expected)) = (last, &block.output) {
            compare::check(&expected.text, &ran.output).map_err(|diff| {
                format!(
                    "{name}, block at line {}, output block at line {}:\n$ {command}\n{diff}",
                    block.line, expected.line
                )
            })?;
        }
    }
    Ok(())
}
