//! From command-line arguments to library types, and back: the one place
//! that knows both the flags and the types they stand for.

use anyhow::{bail, Context};
use steptrace::analysis::Change;
use steptrace_burn::backend::{AutotuneLevel, BackendChoice, CacheConfig};
use steptrace_burn::device::DeviceActivityMode;
use steptrace_burn::{Mode, SyncPolicy};
use steptrace_models::ModelKind;
use steptrace_workload::{BackendSetting, RunConfig};

use crate::args::{
    value_name, AutotuneLevelArg, BackendArg, DatasetArg, Detail, DeviceActivityArg, ModeArg, ModelArg, SyncArg,
    TrainArgs, WorkloadArgs,
};

/// The model a flag names.
pub fn model(m: ModelArg) -> ModelKind {
    match m {
        ModelArg::Mlp => ModelKind::Mlp,
        ModelArg::Convnet => ModelKind::ConvNet,
        ModelArg::Transformer => ModelKind::Transformer,
    }
}

/// The backend choice a flag names.
pub fn backend_choice(b: BackendArg) -> BackendChoice {
    match b {
        BackendArg::Auto => BackendChoice::Auto,
        BackendArg::Cuda => BackendChoice::Cuda,
        BackendArg::Wgpu => BackendChoice::Wgpu,
        BackendArg::Cpu => BackendChoice::Cpu,
    }
}

/// The sync policy a flag names.
pub fn sync(s: SyncArg) -> SyncPolicy {
    match s {
        SyncArg::None => SyncPolicy::None,
        SyncArg::Step => SyncPolicy::Step,
        SyncArg::Phase => SyncPolicy::Phase,
    }
}

/// The device-activity mode a flag names, with kernel attribution at `--detail ops`.
pub fn device_activity(d: DeviceActivityArg, detail: Detail) -> DeviceActivityMode {
    match d {
        DeviceActivityArg::Auto if detail == Detail::Ops => DeviceActivityMode::Attributed,
        DeviceActivityArg::Auto => DeviceActivityMode::Auto,
        DeviceActivityArg::Off => DeviceActivityMode::Off,
    }
}

/// The mode a flag names.
pub fn mode(m: ModeArg) -> Mode {
    match m {
        ModeArg::Train => Mode::Train,
        ModeArg::Infer => Mode::Infer,
    }
}

/// Targets of burn's and cubecl's internal spans.
pub const INTERNAL_TARGETS: &[&str] = &["cubecl=trace", "burn=trace"];

/// The run configuration of a workload.
pub fn config(w: &WorkloadArgs, steps: u64) -> anyhow::Result<RunConfig> {
    let mut cfg = RunConfig::new();
    cfg.model = model(w.model);
    cfg.dataset = value_name(&w.dataset);
    cfg.data_dir = w.data_dir.clone();
    cfg.backend = BackendSetting::Requested(backend_choice(w.backend));
    cfg.steps = steps;
    cfg.batch_size = w.batch;
    cfg.seq_len = w.seq_len;
    cfg.mlp_hidden = w.hidden.as_deref().map(parse_widths).transpose()?;
    cfg.learning_rate = w.lr;
    cfg.seed = w.seed;
    cfg.init = w.init.clone();
    cfg.save_init = w.save_init.clone();
    cfg.sync = sync(w.sync);
    cfg.mode = mode(w.mode);
    cfg.prefetch = w.prefetch;
    cfg.loader_delay_ms = w.loader_delay_ms;
    cfg.plant_upload = w.plant_upload;
    cfg.synthetic_samples = w.synthetic_samples;
    cfg.synthetic_shape = parse_shape(&w.synthetic_shape)?;
    let mut cache = CacheConfig::default();
    if let Some(dir) = &w.cache_dir {
        cache.dir = dir.clone();
    }
    cache.enabled = !w.no_cache;
    cache.autotune_level = w.autotune_level.map(autotune_level);
    cfg.cache = cache;
    cfg.validate()?;
    Ok(cfg)
}

/// The workload as command-line flags. Paths are included only when
/// `with_paths` (they are private: kept out of manifests).
pub fn workload_flags(w: &WorkloadArgs, with_paths: bool) -> Vec<String> {
    let mut flags = Vec::new();
    let mut push = |k: &str, v: String| {
        flags.push(k.to_owned());
        flags.push(v);
    };
    push("--model", value_name(&w.model));
    push("--dataset", value_name(&w.dataset));
    push("--backend", value_name(&w.backend));
    push("--batch", w.batch.to_string());
    push("--lr", w.lr.to_string());
    push("--seed", w.seed.to_string());
    match (&w.init, &w.save_init) {
        // A child process is given the flags as they are.
        (init, save) if with_paths => {
            for (flag, path) in [("--init", init), ("--save-init", save)] {
                if let Some(path) = path {
                    push(flag, path.display().to_string());
                }
            }
        }
        // The reproducing command starts from the record (the one this run read, or the
        // one it saved), named by its file name only: its directory is private.
        (Some(path), _) | (None, Some(path)) => push("--init", steptrace_workload::init::file_name(path)),
        (None, None) => {}
    }
    push("--sync", value_name(&w.sync));
    push("--mode", value_name(&w.mode));
    push("--prefetch", w.prefetch.to_string());
    if w.model == ModelArg::Transformer {
        push("--seq-len", w.seq_len.to_string());
    }
    if let Some(Ok(widths)) = w.hidden.as_deref().map(parse_widths) {
        push("--hidden", render_widths(&widths));
    }
    if w.loader_delay_ms > 0 {
        push("--loader-delay-ms", w.loader_delay_ms.to_string());
    }
    if w.dataset == DatasetArg::Synthetic {
        push("--synthetic-samples", w.synthetic_samples.to_string());
        push("--synthetic-shape", w.synthetic_shape.clone());
    }
    if with_paths {
        if let Some(dir) = &w.data_dir {
            push("--data-dir", dir.display().to_string());
        }
        if let Some(dir) = &w.cache_dir {
            push("--cache-dir", dir.display().to_string());
        }
    }
    if w.no_cache {
        flags.push("--no-cache".into());
    }
    if w.plant_upload {
        flags.push("--plant-upload".into());
    }
    if let Some(level) = &w.autotune_level {
        flags.push("--autotune-level".into());
        flags.push(value_name(level));
    }
    flags
}

/// The autotune level a flag names.
pub fn autotune_level(a: AutotuneLevelArg) -> AutotuneLevel {
    match a {
        AutotuneLevelArg::Minimal => AutotuneLevel::Minimal,
        AutotuneLevelArg::Balanced => AutotuneLevel::Balanced,
        AutotuneLevelArg::Extensive => AutotuneLevel::Extensive,
        AutotuneLevelArg::Full => AutotuneLevel::Full,
    }
}

/// The starting state a workload's runs share, for bench fingerprints: `record
/// NAME` when they start from (or save) a record; `None` for the seed's draw.
pub fn init_label(w: &WorkloadArgs) -> Option<String> {
    w.init.as_ref().or(w.save_init.as_ref()).map(|path| steptrace_workload::init::label(Some(path), w.seed))
}

/// The `steptrace train` command that repeats this run's workload (paths
/// left out: they are private and not part of the workload).
pub fn command_line(a: &TrainArgs) -> String {
    let mut cmd = format!(
        "steptrace train {} --steps {} --schedule {}",
        workload_flags(&a.workload, false).join(" "),
        a.steps,
        a.schedule
    );
    match a.detail {
        Detail::Internals => cmd.push_str(" --detail internals"),
        Detail::Ops => cmd.push_str(" --detail ops"),
        Detail::Steps => {}
    }
    if a.device_activity == DeviceActivityArg::Off {
        cmd.push_str(" --device-activity off");
    }
    if a.memory {
        cmd.push_str(" --memory");
    }
    if a.memory_phases {
        cmd.push_str(" --memory-phases");
    }
    cmd
}

/// `--hidden`'s widths: comma-separated numbers, or `none` for no hidden layer.
fn parse_widths(text: &str) -> anyhow::Result<Vec<usize>> {
    if text.trim() == "none" {
        return Ok(Vec::new());
    }
    text.split(',')
        .map(|p| p.trim().parse::<usize>())
        .collect::<Result<_, _>>()
        .with_context(|| format!("--hidden must be widths separated by commas, like 512,256, or `none` (got `{text}`)"))
}

/// The widths as `--hidden` takes them.
fn render_widths(widths: &[usize]) -> String {
    if widths.is_empty() {
        return "none".into();
    }
    widths.iter().map(usize::to_string).collect::<Vec<_>>().join(",")
}

fn parse_shape(text: &str) -> anyhow::Result<[usize; 3]> {
    let parts: Vec<usize> = text
        .split(',')
        .map(|p| p.trim().parse::<usize>())
        .collect::<Result<_, _>>()
        .with_context(|| format!("--synthetic-shape must be C,H,W (got `{text}`)"))?;
    match parts.as_slice() {
        [c, h, w] if *c > 0 && *h > 0 && *w > 0 => Ok([*c, *h, *w]),
        _ => bail!("--synthetic-shape must be three positive numbers C,H,W (got `{text}`)"),
    }
}

/// The flags of a report's typed change to a `steptrace train` run.
pub fn change_flags(change: &Change, command: &str) -> Vec<(String, String)> {
    let flag = |k: &str, v: String| (k.to_owned(), v);
    match change {
        Change::Prefetch(n) => vec![flag("--prefetch", n.to_string())],
        Change::RecordInternals => vec![flag("--detail", "internals".into())],
        Change::SyncEveryPhase => vec![flag("--sync", value_name(&SyncArg::Phase))],
        Change::BatchSize(n) => vec![flag("--batch", n.to_string())],
        Change::Steps(n) => vec![flag("--steps", n.to_string())],
        Change::SkipFirst(n) => {
            let schedule = flag_value(command, "--schedule").unwrap_or_default();
            let rest: Vec<&str> =
                schedule.split(',').filter(|p| !p.starts_with("skip_first=") && !p.is_empty()).collect();
            let mut parts = vec![format!("skip_first={n}")];
            parts.extend(rest.iter().map(|p| (*p).to_owned()));
            vec![flag("--schedule", parts.join(","))]
        }
        _ => Vec::new(),
    }
}

/// `command` with each change applied as flags.
pub fn render_command(command: &str, changes: &[Change]) -> String {
    let mut cmd = command.to_owned();
    for change in changes {
        for (flag, value) in change_flags(change, &cmd) {
            cmd = with_flag(&cmd, &flag, &value);
        }
    }
    cmd
}

/// How to enable a check, in this program's flags.
pub fn enable_hint(change: &Change) -> String {
    let flags: Vec<String> = change_flags(change, "").into_iter().map(|(k, v)| format!("{k} {v}")).collect();
    format!("rerun with `{}`", flags.join(" "))
}

/// `cmd` with `flag` set to `value` (replaced if present).
fn with_flag(cmd: &str, flag: &str, value: &str) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut words = cmd.split(' ').peekable();
    while let Some(word) = words.next() {
        if word == flag {
            words.next();
            continue;
        }
        parts.push(word.to_owned());
    }
    parts.push(flag.to_owned());
    parts.push(value.to_owned());
    parts.join(" ")
}

fn flag_value(cmd: &str, flag: &str) -> Option<String> {
    let mut words = cmd.split(' ');
    while let Some(word) = words.next() {
        if word == flag {
            return words.next().map(str::to_owned);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_are_replaced_or_appended() {
        let cmd = "steptrace train --model mlp --prefetch 0 --batch 64";
        assert_eq!(with_flag(cmd, "--prefetch", "2"), "steptrace train --model mlp --batch 64 --prefetch 2");
        assert_eq!(with_flag(cmd, "--sync", "phase"), format!("{cmd} --sync phase"));
        assert_eq!(flag_value(cmd, "--batch").as_deref(), Some("64"));
        assert_eq!(flag_value(cmd, "--seed"), None);
    }

    #[test]
    fn typed_changes_render_as_the_flags_of_train() {
        let cmd = "steptrace train --model mlp --steps 40 --schedule skip_first=10,wait=1,warmup=1,active=3";
        assert_eq!(
            render_command(cmd, &[Change::SkipFirst(31), Change::Steps(71)]),
            "steptrace train --model mlp --schedule skip_first=31,wait=1,warmup=1,active=3 --steps 71"
        );
        assert_eq!(render_command(cmd, &[Change::RecordInternals]), format!("{cmd} --detail internals"));
        assert_eq!(render_command(cmd, &[Change::SyncEveryPhase]), format!("{cmd} --sync phase"));
        assert_eq!(enable_hint(&Change::RecordInternals), "rerun with `--detail internals`");
    }

    /// `--hidden` reaches the run configuration and the reproducing command (normalised),
    /// and bad widths or another model are refused with the flag named.
    #[test]
    fn hidden_widths_round_trip_and_bad_ones_are_refused() {
        use clap::Parser;
        let parse = |line: &str| match crate::args::Cli::try_parse_from(line.split(' ')) {
            Ok(crate::args::Cli { command: crate::args::Command::Train(a) }) => a,
            other => panic!("{line}: {other:?}"),
        };
        let wide = parse("steptrace train --backend cpu --hidden 256,4096,256");
        assert_eq!(config(&wide.workload, 40).expect("config").mlp_hidden, Some(vec![256, 4096, 256]));
        let command = command_line(&wide);
        assert!(command.contains("--hidden 256,4096,256"), "{command}");
        assert_eq!(command_line(&parse(&command)), command);
        let linear = parse("steptrace train --backend cpu --hidden none");
        assert_eq!(config(&linear.workload, 40).expect("config").mlp_hidden, Some(vec![]));
        assert!(command_line(&linear).contains("--hidden none"));
        assert_eq!(config(&parse("steptrace train --backend cpu").workload, 40).expect("config").mlp_hidden, None);
        for (line, says) in [
            ("steptrace train --backend cpu --hidden 12,x", "--hidden must be widths"),
            ("steptrace train --backend cpu --hidden 0", "a hidden layer's width must be in"),
            (
                "steptrace train --backend cpu --hidden 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17",
                "hidden layers must be in",
            ),
            ("steptrace train --backend cpu --model convnet --dataset synthetic --hidden 64", "the convnet has none"),
        ] {
            let err = config(&parse(line).workload, 40).expect_err(line);
            assert!(format!("{err:#}").contains(says), "{line}: {err:#}");
        }
    }

    /// `--plant-upload` reaches the run configuration and the reproducing
    /// command, and the command parses back to the same workload.
    #[test]
    fn the_planted_upload_round_trips_through_the_command() {
        use clap::Parser;
        let parse = |line: &str| match crate::args::Cli::try_parse_from(line.split(' ')) {
            Ok(crate::args::Cli { command: crate::args::Command::Train(a) }) => a,
            other => panic!("{line}: {other:?}"),
        };
        let planted = parse("steptrace train --backend cpu --steps 12 --plant-upload");
        assert!(planted.workload.plant_upload);
        assert!(config(&planted.workload, 12).expect("config").plant_upload);
        let command = command_line(&planted);
        assert!(command.split(' ').any(|w| w == "--plant-upload"), "{command}");
        let again = parse(&command);
        assert!(again.workload.plant_upload);
        assert_eq!(command_line(&again), command);
        let plain = parse("steptrace train --backend cpu");
        assert!(!plain.workload.plant_upload && !config(&plain.workload, 40).expect("config").plant_upload);
        assert!(!command_line(&plain).contains("--plant-upload"));
    }

    /// `--init` and `--save-init` reach the run configuration; a child process gets them as
    /// they are; the reproducing command starts from the record, named by its file name only.
    #[test]
    fn the_initial_state_reaches_the_config_and_the_command_by_file_name_only() {
        use clap::Parser;
        let dir = tempfile::tempdir().expect("tempdir");
        let record = dir.path().join("start.mpk");
        std::fs::write(&record, b"x").expect("write");
        let parse = |line: &str| match crate::args::Cli::try_parse_from(line.split(' ')) {
            Ok(crate::args::Cli { command: crate::args::Command::Train(a) }) => a,
            other => panic!("{line}: {other:?}"),
        };
        let from = parse(&format!("steptrace train --backend cpu --init {}", record.display()));
        assert_eq!(config(&from.workload, 3).expect("config").init.as_deref(), Some(record.as_path()));
        let command = command_line(&from);
        assert!(
            command.contains("--init start.mpk") && !command.contains(&dir.path().display().to_string()),
            "{command}"
        );
        assert!(workload_flags(&from.workload, true).contains(&record.display().to_string()));
        assert_eq!(init_label(&from.workload).as_deref(), Some("record start.mpk"));
        let save = parse("steptrace train --backend cpu --save-init new.mpk");
        assert!(command_line(&save).contains("--init new.mpk") && !command_line(&save).contains("--save-init"));
        assert!(workload_flags(&save.workload, true).windows(2).any(|w| w[0] == "--save-init" && w[1] == "new.mpk"));
        // An existing --save-init file is refused before anything runs.
        let onto = parse(&format!("steptrace train --backend cpu --save-init {}", record.display()));
        let err = config(&onto.workload, 3).unwrap_err().to_string();
        assert!(err.contains("already exists"), "{err}");
        assert_eq!(init_label(&parse("steptrace train").workload), None);
    }

    #[test]
    fn every_value_enum_converts() {
        use clap::ValueEnum;
        for m in ModelArg::value_variants() {
            assert_eq!(model(*m).name(), value_name(m));
        }
        assert!(BackendArg::value_variants().iter().all(|b| !value_name(b).is_empty()));
        assert_eq!(sync(SyncArg::Phase), SyncPolicy::Phase);
        assert_eq!(mode(ModeArg::Infer), Mode::Infer);
    }
}
