//! The read side (`report`, `inspect`, `compare`) against files that are not what they
//! seem: FIFOs and devices named as traces, folders holding them, gzip bombs, NUL bytes and
//! gzip files with bytes after their end. Each is refused at once and named for what it is,
//! or skipped with a warning in a folder. Every command here runs with its address space
//! capped at 1 GB (`ulimit -v`), where a read without end fails at once rather than taking
//! the machine's memory, and is killed if it has not ended after 20 s.
#![cfg(unix)]

mod common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{flat, text};

const V1: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/steptrace-v1-cuda-mlp-h200.trace.json");

/// The address space each command gets, KB.
const LIMIT_KB: u64 = 1_000_000;

/// `steptrace ARGS` in `dir`, its address space capped: its output once it exits (or after
/// 20 s, then killed), and how long it ran.
fn run_limited(args: &[&str], dir: &Path) -> (Output, Duration) {
    let mut child = Command::new("sh")
        .args(["-c", &format!("ulimit -v {LIMIT_KB} && exec \"$0\" \"$@\""), env!("CARGO_BIN_EXE_steptrace")])
        .args(args)
        .current_dir(dir)
        .env("NODEVICE_SELECT", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() && started.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let took = started.elapsed();
    let _ = child.kill();
    (child.wait_with_output().unwrap(), took)
}

/// Runs `args`, which must end promptly with `code`, saying each of `says`.
fn expect(args: &[&str], dir: &Path, code: i32, says: &[&str]) -> String {
    let (out, took) = run_limited(args, dir);
    let (stdout, stderr) = text(&out);
    let all = flat(&format!("{stdout}{stderr}"));
    assert!(took < Duration::from_secs(10), "{args:?} ran {took:?}: {all}");
    assert_eq!(out.status.code(), Some(code), "{args:?}: {all}");
    assert!(!all.contains("panicked"), "{args:?}: {all}");
    for part in says {
        assert!(all.contains(part), "{args:?}: missing {part:?} in {all}");
    }
    all
}

fn mkfifo(path: &Path) {
    assert!(Command::new("mkfifo").arg(path).status().unwrap().success());
}

/// `bytes` compressed by `gzip -9`: one gzip member.
fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut child =
        Command::new("gzip").args(["-9", "-c"]).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = bytes.to_vec();
    let feeder = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output().unwrap();
    feeder.join().unwrap().unwrap();
    assert!(out.status.success());
    out.stdout
}

/// A gzip file of `members` members of 1 MiB of `byte` each: 1 MiB compresses to about
/// 1 KB, so that a GiB of it takes a MB.
fn bomb(byte: u8, members: usize, before: &[u8], after: &[u8]) -> Vec<u8> {
    let mut out = if before.is_empty() { Vec::new() } else { gzip(before) };
    out.extend(gzip(&vec![byte; 1 << 20]).repeat(members));
    if !after.is_empty() {
        out.extend(gzip(after));
    }
    out
}

#[test]
fn fifos_named_as_traces_are_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    mkfifo(&dir.path().join("f.trace.json"));
    // Not named as a trace: compare reads it to tell a bench result from a trace.
    mkfifo(&dir.path().join("f.json"));
    let says = ["it is a FIFO (named pipe), not a regular file: traces are read from regular files only"];
    expect(&["report", "f.trace.json"], dir.path(), 1, &says);
    expect(&["inspect", "f.trace.json"], dir.path(), 1, &says);
    expect(&["inspect", "f.trace.json", "--redact", "out.json"], dir.path(), 1, &says);
    expect(&["compare", "f.trace.json", "f.trace.json"], dir.path(), 1, &says);
    expect(&["compare", "f.json", "f.json"], dir.path(), 1, &says);
    assert!(!dir.path().join("out.json").exists());
}

#[test]
fn devices_are_refused_unread() {
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink("/dev/zero", dir.path().join("z.json")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", dir.path().join("z.trace.json.gz")).unwrap();
    std::os::unix::fs::symlink("/dev/null", dir.path().join("n.trace.json")).unwrap();
    let says = ["it is a character device, not a regular file"];
    for args in [
        &["report", "z.json"][..],
        &["inspect", "z.json"],
        &["report", "z.trace.json.gz"],
        &["compare", "z.json", "z.json"],
        &["report", "n.trace.json"],
    ] {
        expect(args, dir.path(), 1, &says);
    }
}

#[test]
fn a_folder_skips_what_is_not_a_regular_file_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("d");
    std::fs::create_dir_all(d.join("sub")).unwrap();
    std::fs::copy(V1, d.join("w.trace.json")).unwrap();
    mkfifo(&d.join("f.trace.json"));
    mkfifo(&d.join("sub/g.trace.json"));
    std::os::unix::fs::symlink("/dev/zero", d.join("z.trace.json.partial")).unwrap();
    expect(
        &["report", "d"],
        dir.path(),
        0,
        &[
            "skipped d/f.trace.json: it is a FIFO (named pipe), not a regular file",
            "skipped d/sub/g.trace.json: it is a FIFO (named pipe)",
            "skipped d/z.trace.json.partial: it is a character device",
            "1 file(s) from steptrace",
        ],
    );
    // Nothing else to read: the error says what was skipped.
    let e = dir.path().join("e");
    std::fs::create_dir(&e).unwrap();
    mkfifo(&e.join("f.trace.json"));
    expect(&["report", "e"], dir.path(), 1, &["holds no *.trace.json file", "skipped e/f.trace.json: it is a FIFO"]);
    expect(&["compare", "d", "e"], dir.path(), 1, &["skipped e/f.trace.json: it is a FIFO"]);
}

#[test]
fn a_gzip_bomb_is_refused_by_its_expanded_size() {
    let dir = tempfile::tempdir().unwrap();
    // 1 GiB of spaces inside a list: a valid, empty trace once expanded, from a 1 MB file.
    let bytes = bomb(b' ', 1024, b"[", b"]");
    assert!(bytes.len() < 2 << 20, "{}", bytes.len());
    std::fs::write(dir.path().join("b.trace.json.gz"), &bytes).unwrap();
    let says =
        ["decompresses to more than 268435456 bytes, the most it is read to (100 times its size, 256 MiB at least): \
         refused as a decompression bomb"];
    expect(&["report", "b.trace.json.gz"], dir.path(), 1, &says);
    expect(&["inspect", "b.trace.json.gz"], dir.path(), 1, &says);
    // A real trace, compressed, reads whole.
    std::fs::write(dir.path().join("t.trace.json.gz"), gzip(&std::fs::read(V1).unwrap())).unwrap();
    expect(&["report", "t.trace.json.gz"], dir.path(), 0, &["t.trace.json.gz (94 events, object format)"]);
}

#[test]
fn nul_bytes_are_named_as_such() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("n.trace.json"), vec![0; 1 << 20]).unwrap();
    let only = "NUL bytes, not JSON: the file holds 1048576 NUL bytes and nothing else";
    let all = expect(&["report", "n.trace.json"], dir.path(), 1, &[only]);
    assert!(!all.contains("empty file"), "{all}");
    expect(&["inspect", "n.trace.json"], dir.path(), 1, &[only]);
    // 64 MiB of them compressed: counted as they come out, never held.
    std::fs::write(dir.path().join("n64.trace.json.gz"), bomb(0, 64, b"", b"")).unwrap();
    expect(
        &["report", "n64.trace.json.gz"],
        dir.path(),
        1,
        &["invalid trace at byte 0 of the decompressed data: NUL bytes, not JSON: the file holds 67108864 NUL bytes"],
    );
    // A GiB of them compressed: named as soon as the limit is reached.
    std::fs::write(dir.path().join("n1g.trace.json.gz"), bomb(0, 1024, b"", b"")).unwrap();
    expect(
        &["inspect", "n1g.trace.json.gz"],
        dir.path(),
        1,
        &["NUL bytes, not JSON: the file starts with 268435456 NUL bytes"],
    );
}

#[test]
fn bytes_after_a_complete_gzip_member_are_named_not_taken_for_a_cut() {
    let dir = tempfile::tempdir().unwrap();
    let whole = gzip(&std::fs::read(V1).unwrap());
    let end = whole.len();
    for (name, tail) in [("nl.trace.json.gz", &b"\n"[..]), ("text.trace.json.gz", b"appended by mistake")] {
        std::fs::write(dir.path().join(name), [&whole[..], tail].concat()).unwrap();
        let said = format!("trailing garbage after a complete gzip member, at byte {end} of the compressed file");
        let all = expect(&["report", name], dir.path(), 1, &[said.as_str()]);
        assert!(!all.contains("cut short"), "{all}");
        expect(&["inspect", name], dir.path(), 1, &[said.as_str()]);
    }
    // NUL padding after the member is ignored, as gzip ignores it; a cut is still a cut.
    std::fs::write(dir.path().join("pad.trace.json.gz"), [&whole[..], &[0; 512][..]].concat()).unwrap();
    expect(&["report", "pad.trace.json.gz"], dir.path(), 0, &["pad.trace.json.gz (94 events, object format)"]);
    std::fs::write(dir.path().join("cut.trace.json.gz"), &whole[..end / 2]).unwrap();
    expect(&["report", "cut.trace.json.gz"], dir.path(), 0, &["cut short"]);
}

/// `train --init` reads a record only from a regular file: a folder, a FIFO or a device is named
/// for what it is, unread, and the run does not start (a FIFO read would wait forever).
#[test]
fn init_records_are_read_only_from_regular_files() {
    let dir = tempfile::tempdir().unwrap();
    mkfifo(&dir.path().join("fifo"));
    std::fs::create_dir(dir.path().join("folder")).unwrap();
    let train =
        |init: &str| ["train", "--backend", "cpu", "--steps", "2", "--no-profile", "--init", init].map(str::to_owned);
    for (init, what) in [("folder", "a directory"), ("fifo", "a FIFO"), ("/dev/zero", "a device")] {
        let args = train(init);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        expect(&args, dir.path(), 1, &[&format!("--init {init}: {what}, not a file")]);
    }
    let args = train("missing");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    expect(&args, dir.path(), 1, &["--init missing: no such file"]);
}
