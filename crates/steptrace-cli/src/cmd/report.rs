//! `steptrace report`: step timing first, then spans, device and
//! hypotheses.

mod device;
mod html;
pub(crate) mod load;
mod ranks;
mod render;

use std::process::ExitCode;

use anyhow::bail;
use steptrace::analysis::{rank_of, RankReport, Report, ReportOptions};
use steptrace::read::display::escape;

use crate::args::ReportArgs;
use crate::convert::render_command;

pub fn run(a: ReportArgs) -> anyhow::Result<ExitCode> {
    let mut loaded = load::load(&a.traces)?;
    for w in &loaded.warnings {
        eprintln!("warning: {w}");
    }
    let options = ReportOptions { batch_size: a.batch, ops: steptrace_burn::report_ops() };
    let several = RankReport::applies(&loaded.files);
    if let Some(rank) = a.rank {
        loaded.files.retain(|(path, trace)| rank_of(path, trace).is_some_and(|info| info.rank == rank));
        if loaded.files.is_empty() {
            bail!("no trace of rank {rank} among the files given (ranks come from each file's distributedInfo)");
        }
    } else if several {
        if a.plot.is_some() || a.html.is_some() {
            bail!("these traces hold several ranks: --plot and --html draw one rank's steps; choose it with --rank N");
        }
        let report = RankReport::build(&loaded.files, &options)?;
        if a.json {
            println!("{}", serde_json::to_string_pretty(&report)?);
        } else {
            print!("{}", crate::console::fit(&ranks::render(&report)));
        }
        return Ok(ExitCode::SUCCESS);
    }
    let mut report = Report::build(&loaded.files, &options)?;
    report.warnings.splice(0..0, loaded.warnings);
    report.render_commands(render_command);
    if let Some(path) = &a.plot {
        super::plot::steps_svg(&report, path)?;
        eprintln!("plot written to {}", escape(&path.display().to_string()));
    }
    if let Some(path) = &a.html {
        html::write(&report, a.top, path)?;
        eprintln!("html report written to {}", escape(&path.display().to_string()));
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", crate::console::fit(&render::render(&report, a.top)));
    }
    Ok(ExitCode::SUCCESS)
}
