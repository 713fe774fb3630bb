//! `steptrace inspect`: what a trace would reveal if shared.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;

use anyhow::bail;
use steptrace::analysis::{Inventory, InventoryBuilder, SanitisedCopy};
use steptrace::display::{escape, label, LABEL_CHARS};
use steptrace::reader::{read_json_events, JsonEvent, JsonTrace, ReadError, TraceFile};

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
    // file is read as it is parsed (a regular file only), never held whole,
    // nor its events: each is listed and scanned (and, for a copy, redacted)
    // as it is read.
    let file = TraceFile::open(&a.trace)?;
    let size = file.len();
    let mut inventory = InventoryBuilder::new();
    let mut copy = a.redact.as_ref().map(|_| SanitisedCopy::new());
    // What a partial file's header is looked for among.
    let mut head: Vec<JsonEvent> = Vec::new();
    // The copy keeps the file's top-level order (a rank's distributedInfo first).
    let (trace, order) = read_json_events(file, size, |event| {
        inventory.event(&event);
        if let Some(copy) = &mut copy {
            copy.event(&event);
        }
        if head.len() < HEAD_EVENTS {
            head.push(event);
        }
    })
    .map_err(|err| err.with_path(&a.trace))?;
    let inv = inventory.finish(&trace.metadata);
    let trace = JsonTrace { events: head, ..trace };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&inv)?);
    } else {
        print_inventory(&a, &inv, &trace);
    }
    if let (Some(out), Some(copy)) = (&a.redact, copy) {
        // The copy is scanned again before it is written, from a second read
        // of the file: nothing flagged is ever written.
        let again = TraceFile::open(&a.trace)?;
        let size = again.len();
        let outcome = copy.write(&trace, &order, again, size, out)?;
        let check = inventory_of(out)?;
        eprintln!(
            "sanitised copy: {} ({} strings replaced, {} bytes{}{}); it scans {}",
            escape(&out.display().to_string()),
            outcome.replaced,
            outcome.bytes,
            if is_gzip(out) { ", gzip" } else { "" },
            if outcome.rebuilt { ", rebuilt from the complete events of a cut file" } else { "" },
            if check.findings.is_empty() {
                "clean".to_owned()
            } else {
                format!("with {} findings left", check.findings.len())
            }
        );
    }
    Ok(if inv.findings.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(FLAGGED) })
}

/// The first events of a file, where a partial file's header is.
const HEAD_EVENTS: usize = 16;

/// The inventory of the trace file at `path`, read as it is parsed.
fn inventory_of(path: &Path) -> Result<Inventory, ReadError> {
    let file = TraceFile::open(path)?;
    let size = file.len();
    let mut inventory = InventoryBuilder::new();
    let (trace, _) =
        read_json_events(file, size, |event| inventory.event(&event)).map_err(|err| err.with_path(path))?;
    Ok(inventory.finish(&trace.metadata))
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
    let unfinished =
        named || trace.steptrace().ok().flatten().is_some_and(|s| s.header.is_some() && s.metadata.is_none());
    match (unfinished, trace.truncated) {
        (true, _) => " (cut short: a .partial file steptrace never finished, left by a crash, a second Ctrl-C, a failed write or a failed host allocation; complete events only)",
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
