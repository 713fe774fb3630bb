//! `steptrace inspect`: what a trace would reveal if shared.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;

use anyhow::bail;
use steptrace::analysis::{redact_file_in_order, Inventory};
use steptrace::read::display::{escape, label, LABEL_CHARS};
use steptrace::reader::{read_json_trace_file, read_json_trace_in_order, JsonTrace, TraceFile};

use crate::args::InspectArgs;

/// Exit status when something is flagged.
const FLAGGED: u8 = 3;

pub fn run(a: InspectArgs) -> anyhow::Result<ExitCode> {
    // Refused before anything is read or printed: an output that exists,
    // or whose folder does not.
    if let Some(out) = &a.redact {
        check_new_file(out)?;
    }
    // Every field of every event: a secret can sit in any of them. The
    // file is read as it is parsed (a regular file only), never held whole.
    let file = TraceFile::open(&a.trace)?;
    let size = file.len();
    // The copy keeps the file's top-level order (a rank's distributedInfo first).
    let (trace, order) = read_json_trace_in_order(file, size).map_err(|err| err.with_path(&a.trace))?;
    let inv = Inventory::of(&trace);
    if a.json {
        println!("{}", serde_json::to_string_pretty(&inv)?);
    } else {
        print_inventory(&a, &inv, &trace);
    }
    if let Some(out) = &a.redact {
        // The copy is scanned again before it is written: nothing flagged
        // is ever written.
        let outcome = redact_file_in_order(&trace, &order, out)?;
        // The source's events are done with: the copy read back is not held beside them.
        drop(trace);
        let check = Inventory::of(&read_json_trace_file(out)?);
        eprintln!(
            "sanitised copy: {} ({} strings replaced, {} bytes{}{}); it scans {}",
            escape(&out.display().to_string()),
            outcome.replaced,
            outcome.bytes,
            if is_gzip(out) { ", gzip" } else { "" },
            if outcome.rebuilt { ", rebuilt from the complete events of a cut file" } else { "" },
            if check.findings.is_empty() { "clean".to_owned() } else { format!("with {} findings left", check.findings.len()) }
        );
    }
    Ok(if inv.findings.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(FLAGGED) })
}

fn is_gzip(path: &Path) -> bool {
    path.extension().is_some_and(|e| e.eq_ignore_ascii_case("gz"))
}

/// Refuses an output that exists (a sanitised copy never overwrites a
/// file, a dangling link included) or whose folder does not exist.
fn check_new_file(out: &Path) -> anyhow::Result<()> {
    let path = out.display().to_string();
    let shown = escape(&path);
    let text = out.as_os_str().to_string_lossy();
    if out.file_name().is_none() || text.ends_with('/') || text.ends_with(std::path::MAIN_SEPARATOR) {
        bail!("--redact {shown} names no file: give the path of a new file (nothing was read or written)");
    }
    if out.symlink_metadata().is_ok() {
        bail!("{shown} already exists: a sanitised copy never overwrites a file (nothing was read or written)");
    }
    let parent = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if !parent.is_dir() {
        let why = if parent.exists() { "is not a folder" } else { "does not exist" };
        bail!(
            "cannot write the sanitised copy {shown}: its folder {} {why} (nothing was read or written)",
            escape(&parent.display().to_string())
        );
    }
    Ok(())
}

/// What the header line says of a damaged file.
fn damage(a: &InspectArgs, trace: &JsonTrace) -> &'static str {
    let named = a.trace.extension().is_some_and(|e| e == "partial");
    let unfinished = named || trace.steptrace().ok().flatten().is_some_and(|s| s.header.is_some() && s.metadata.is_none());
    match (unfinished, trace.truncated) {
        (true, _) => " (cut short: a .partial file steptrace never finished, left by a crash, a second Ctrl-C or a failed write; complete events only)",
        (false, true) => " (cut short: complete events only)",
        (false, false) => "",
    }
}

fn print_inventory(a: &InspectArgs, inv: &Inventory, trace: &JsonTrace) {
    println!("{}{}", escape(&a.trace.display().to_string()), damage(a, trace));
    let counted = |title: &str, map: &BTreeMap<String, usize>| {
        println!("\n{title} ({}):", map.len());
        for (name, n) in map {
            let name = if name.is_empty() { "(empty)".into() } else { label(name, LABEL_CHARS) };
            println!("  {name}  ×{n}");
        }
    };
    counted("event names", &inv.names);
    counted("categories", &inv.categories);
    counted("argument keys", &inv.arg_keys);
    if !inv.other_fields.is_empty() {
        counted("other event fields", &inv.other_fields);
    }
    let listed = |title: &str, items: &[String]| {
        println!("\n{title} ({}):", items.len());
        for item in items {
            println!("  {}", label(item, LABEL_CHARS));
        }
    };
    listed("thread names", &inv.thread_names);
    listed("process names", &inv.process_names);
    listed("metadata fields", &inv.metadata_fields);
    if inv.findings.is_empty() {
        println!("\nnothing flagged: no e-mail address, token, home-directory or network path, card number,");
        println!("  national identifier, IBAN or input content was found");
    } else {
        let occurrences = if inv.flagged == 1 { "occurrence" } else { "occurrences" };
        println!("\nflagged ({} distinct, {} {occurrences}):", inv.findings.len(), inv.flagged);
        for f in &inv.findings {
            let times = if f.occurrences > 1 { format!(" ×{}", f.occurrences) } else { String::new() };
            println!("  {}: {} ({}){times}", label(&f.location, LABEL_CHARS), f.kind, escape(&f.excerpt));
        }
        println!("share a copy made with --redact OUT instead");
    }
}
