//! `steptrace inspect`: what a trace would reveal if shared.

use std::process::ExitCode;

use anyhow::Context;
use steptrace::analysis::{redact_file, Inventory};
use steptrace::reader::{parse_trace, read_trace_file};

use crate::args::InspectArgs;

/// Exit status when something is flagged.
const FLAGGED: u8 = 3;

pub fn run(a: InspectArgs) -> anyhow::Result<ExitCode> {
    let bytes = std::fs::read(&a.trace).with_context(|| format!("cannot read {}", a.trace.display()))?;
    let trace = parse_trace(&bytes).map_err(|e| e.with_path(&a.trace))?;
    let inv = Inventory::of(&trace);
    if a.json {
        println!("{}", serde_json::to_string_pretty(&inv)?);
    } else {
        print_inventory(&a, &inv, trace.truncated);
    }
    if let Some(out) = &a.redact {
        let outcome = redact_file(&bytes, &trace, out)
            .with_context(|| format!("cannot write the sanitised copy {} (it is never overwritten)", out.display()))?;
        let check = Inventory::of(&read_trace_file(out)?);
        eprintln!(
            "sanitised copy: {} ({} strings replaced, {} bytes{}); it scans {}",
            out.display(),
            outcome.replaced,
            outcome.bytes,
            if outcome.rebuilt { ", rebuilt from the complete events of a cut file" } else { "" },
            if check.findings.is_empty() { "clean".to_owned() } else { format!("with {} findings left", check.findings.len()) }
        );
    }
    Ok(if inv.findings.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(FLAGGED) })
}

fn print_inventory(a: &InspectArgs, inv: &Inventory, truncated: bool) {
    println!("{}{}", a.trace.display(), if truncated { " (cut short: complete events only)" } else { "" });
    let counted = |title: &str, map: &std::collections::BTreeMap<String, usize>| {
        println!("\n{title} ({}):", map.len());
        for (name, n) in map {
            println!("  {name}  ×{n}");
        }
    };
    counted("event names", &inv.names);
    counted("categories", &inv.categories);
    counted("argument keys", &inv.arg_keys);
    let listed = |title: &str, items: &[String]| {
        println!("\n{title} ({}):", items.len());
        for item in items {
            println!("  {item}");
        }
    };
    listed("thread names", &inv.thread_names);
    listed("process names", &inv.process_names);
    listed("metadata fields", &inv.metadata_fields);
    if inv.findings.is_empty() {
        println!("\nnothing flagged: no e-mail address, token, home-directory path or input content was found");
    } else {
        println!("\nflagged ({}):", inv.findings.len());
        for f in &inv.findings {
            println!("  {}: {} ({})", f.location, f.kind, f.excerpt);
        }
        println!("share a copy made with --redact OUT instead");
    }
}
