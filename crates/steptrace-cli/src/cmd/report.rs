//! `steptrace report`: step timing first, then spans, device and
//! hypotheses.

mod attribution;
mod device;
mod html;
pub(crate) mod load;
mod memory;
mod outputs;
mod ranks;
mod render;
mod roofline;

use std::process::ExitCode;

use anyhow::bail;
use steptrace::analysis::{check_ranks, rank_of, RankReport, Report, ReportError, ReportOptions};
use steptrace::display::escape;

pub(crate) use render::source_flags;

use crate::args::ReportArgs;
use crate::convert::render_command;

pub fn run(a: ReportArgs) -> anyhow::Result<ExitCode> {
    // Every output is checked before anything is read or written.
    outputs::check_new(&[("--plot", a.plot.as_deref()), ("--html", a.html.as_deref())])?;
    let mut loaded = load::load(&a.traces)?;
    for w in &loaded.warnings {
        eprintln!("warning: {w}");
    }
    let peaks = a.peaks.as_deref().map(load::peaks).transpose()?;
    let options = ReportOptions { batch_size: a.batch, ops: steptrace_burn::ops::report_ops(), peaks };
    let several = RankReport::applies(&loaded.files);
    if a.rank.is_none() && several {
        if a.plot.is_some() || a.html.is_some() {
            bail!("these traces hold several ranks: --plot and --html draw one rank's steps; choose it with --rank N");
        }
        let mut report = RankReport::build_loaded(loaded.files, &options).map_err(refused)?;
        report.warnings.splice(0..0, loaded.warnings);
        if a.json {
            println!("{}", serde_json::to_string_pretty(&report)?);
        } else {
            print!("{}", crate::console::fit(&ranks::render(&report)));
        }
        return Ok(ExitCode::SUCCESS);
    }
    // What the files say of their ranks holds for every file, whichever rank is reported.
    let check = check_ranks(&loaded.files).map_err(refused)?;
    loaded.warnings.extend(check.warnings.iter().cloned());
    if let Some(rank) = a.rank {
        loaded.files.retain(|(path, trace)| rank_of(path, trace).is_some_and(|info| info.rank == rank));
        if loaded.files.is_empty() {
            bail!("no trace of rank {rank} among the files given (ranks come from each file's distributedInfo)");
        }
    } else if check.any() {
        let alone = format!(
            "this is the report of rank {} alone, not of the run",
            check.ranks.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
        );
        loaded.warnings.extend(check.missing_warning(&alone));
    }
    let mut report = Report::build_loaded(loaded.files, &options).map_err(refused)?;
    report.warnings.splice(0..0, loaded.warnings);
    report.render_commands(render_command);
    // Both outputs drawn before either is written: a failure leaves neither.
    let svg = a.plot.as_ref().map(|_| super::plot::svg(&report)).transpose()?;
    let page = a.html.as_ref().map(|_| html::page(&report, a.top));
    if let (Some(path), Some(svg)) = (&a.plot, svg) {
        super::plot::write_new(path, svg.as_bytes())?;
        eprintln!("plot written to {}", escape(&path.display().to_string()));
    }
    if let (Some(path), Some(page)) = (&a.html, page) {
        super::plot::write_new(path, page.as_bytes())?;
        eprintln!("html report written to {}", escape(&path.display().to_string()));
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", crate::console::fit(&render::render(&report, a.top)));
    }
    Ok(ExitCode::SUCCESS)
}

/// A report that cannot be built, its file names terminal-safe.
fn refused(err: ReportError) -> anyhow::Error {
    anyhow::anyhow!("{}", escape(&err.to_string()))
}
