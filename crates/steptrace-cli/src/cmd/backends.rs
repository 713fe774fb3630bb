//! `steptrace backends`: what is available here, and why not.

use std::process::ExitCode;

use steptrace_burn::backend::{self, BackendChoice};

pub fn run() -> anyhow::Result<ExitCode> {
    let mut table = crate::console::table();
    table.set_header(["backend", "available", "device", "why not"]);
    for probe in backend::probe_all() {
        table.add_row([
            probe.kind.to_string(),
            if probe.available { "yes".to_owned() } else { "no".to_owned() },
            probe.device.clone().unwrap_or_else(|| "-".to_owned()),
            probe.reason.clone().unwrap_or_default(),
        ]);
    }
    println!("{table}");
    match backend::select(BackendChoice::Auto) {
        Ok(selection) => crate::console::say(&format!("--backend auto would use: {}", selection.label())),
        Err(err) => crate::console::say(&format!("--backend auto would fail: {err}")),
    }
    Ok(ExitCode::SUCCESS)
}
