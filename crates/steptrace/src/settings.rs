//! Every environment variable steptrace reads, in one place: what each may hold, whether it
//! is a setting for users or an experiment's knob, and what a value it does not know does.
//!
//! The variables are read here and nowhere else (steptrace-burn's too: it asks this module).
//! A value that is not one of a variable's accepted values is kept as its default and named
//! by [`problems`], which `steptrace train` and a `steptrace_burn::Session` print as
//! warnings at start; a knob of an experiment that is set is named by [`experiments`], which
//! they print too, and every trace records the knobs that shaped it in its metadata. Values
//! are read without regard to case or surrounding blanks.
//!
//! | variable | kind | values | what it does |
//! |---|---|---|---|
//! | `STEPTRACE_CACHE_DIR` | setting | a folder | cubecl's kernel and autotune caches (default `$XDG_CACHE_HOME/steptrace/cubecl`, else `~/.cache/steptrace/cubecl`), and the device peaks in its `peaks` folder (default `$XDG_CACHE_HOME/steptrace/peaks`, else `~/.cache/steptrace/peaks`) |
//! | `STEPTRACE_EXPECT_LAVAPIPE` | setting | any | the wgpu probe expects Mesa's CPU adapter even where its driver file is not found |
//! | `STEPTRACE_SPANS` | experiment | `steps`, `unwritten`, `announced` | `steps`: only `ProfilerStep` spans are kept; `unwritten`: spans are made and handed to the writer, which writes none of the stepping thread's (what writing costs the step); `announced`: every batch of the stepping thread is announced through tracing-chrome |
//! | `STEPTRACE_OWN_SPANS` | experiment | `tracing` | steptrace's own spans go through tracing's registry rather than around it |
//! | `STEPTRACE_LINGER` | experiment | `off`, or 10 to 50000 (µs) | the writer thread parks between steps, or polls at that period, instead of its default |
//! | `STEPTRACE_ATTRIBUTION` | experiment | `off` | kernel attribution (`--detail ops`) is turned off: on CUDA kernels are still recorded by CUPTI, untied to ops; on wgpu none are |
//! | `STEPTRACE_CUPTI` | experiment | `keep`, `per-cycle`, `off` | CUPTI's kinds kept enabled between windows always, enabled per window, or CUPTI not used (the path of a machine without libcupti) |
//!
//! Test harnesses also set `STEPTRACE_NVTX_LOG` (read by the tests' NVTX injection library),
//! `STEPTRACE_CACHE_TEST_DIR` and `STEPTRACE_NO_ADAPTER_CHILD` (read by unit tests' child
//! processes); nothing outside tests reads them.

use std::path::PathBuf;
use std::sync::OnceLock;

/// Whether a variable is for users or for an experiment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Kind {
    /// A setting a user may need.
    Setting,
    /// An experiment's knob: it changes what is measured or written, and says so.
    Experiment,
}

/// One variable: its name, kind, the values it takes, and what it does.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct Variable {
    /// `STEPTRACE_…`.
    pub name: &'static str,
    /// A setting or an experiment.
    pub kind: Kind,
    /// The values it takes, as words.
    pub values: &'static str,
    /// What it does.
    pub meaning: &'static str,
}

/// `STEPTRACE_CACHE_DIR`.
pub const CACHE_DIR: &str = "STEPTRACE_CACHE_DIR";
/// `STEPTRACE_EXPECT_LAVAPIPE`.
pub const EXPECT_LAVAPIPE: &str = "STEPTRACE_EXPECT_LAVAPIPE";
/// `STEPTRACE_SPANS`.
pub const SPANS: &str = "STEPTRACE_SPANS";
/// `STEPTRACE_OWN_SPANS`.
pub const OWN_SPANS: &str = "STEPTRACE_OWN_SPANS";
/// `STEPTRACE_LINGER`.
pub const LINGER: &str = "STEPTRACE_LINGER";
/// `STEPTRACE_ATTRIBUTION`.
pub const ATTRIBUTION: &str = "STEPTRACE_ATTRIBUTION";
/// `STEPTRACE_CUPTI`.
pub const CUPTI: &str = "STEPTRACE_CUPTI";

/// Every variable steptrace reads outside its tests.
pub const VARIABLES: &[Variable] = &[
    Variable {
        name: CACHE_DIR,
        kind: Kind::Setting,
        values: "a folder",
        meaning: "where cubecl's kernel and autotune caches are kept, and the device peaks (in its `peaks` folder)",
    },
    Variable {
        name: EXPECT_LAVAPIPE,
        kind: Kind::Setting,
        values: "any value",
        meaning: "the wgpu probe expects Mesa's CPU adapter (lavapipe) even where its driver file is not found",
    },
    Variable {
        name: SPANS,
        kind: Kind::Experiment,
        values: "steps, unwritten or announced",
        meaning: "which of the stepping thread's spans reach the trace, and how",
    },
    Variable {
        name: OWN_SPANS,
        kind: Kind::Experiment,
        values: "tracing",
        meaning: "steptrace's own spans through tracing's registry",
    },
    Variable {
        name: LINGER,
        kind: Kind::Experiment,
        values: "off, or 10 to 50000 (µs)",
        meaning: "how the writer thread waits between steps",
    },
    Variable { name: ATTRIBUTION, kind: Kind::Experiment, values: "off", meaning: "kernel attribution turned off" },
    Variable {
        name: CUPTI,
        kind: Kind::Experiment,
        values: "keep, per-cycle or off",
        meaning: "how CUPTI's kinds are enabled, or CUPTI not used",
    },
];

/// `STEPTRACE_SPANS`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Spans {
    /// Every span (unset).
    All,
    /// Only `ProfilerStep` spans.
    Steps,
    /// Spans made and handed over; the stepping thread's never written.
    Unwritten,
    /// Every batch announced through tracing-chrome.
    Announced,
}

/// `STEPTRACE_LINGER`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Linger {
    /// The default period (unset, or a value not understood).
    Default,
    /// Parked between steps.
    Off,
    /// Polls every so many µs.
    Every(u64),
}

/// `STEPTRACE_CUPTI`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Cupti {
    /// Kinds kept on between windows a few steps apart (unset).
    Near,
    /// Always kept on (`keep`).
    Keep,
    /// Enabled per window (`per-cycle`).
    PerCycle,
    /// No CUPTI (`off`).
    Off,
}

/// The variables as read once, with what they did not understand.
#[derive(Debug)]
struct Read {
    spans: Spans,
    own_spans_tracing: bool,
    linger: Linger,
    attribution_off: bool,
    cupti: Cupti,
    cache_dir: Option<PathBuf>,
    expect_lavapipe: bool,
    problems: Vec<String>,
    experiments: Vec<String>,
}

static READ: OnceLock<Read> = OnceLock::new();

fn read() -> &'static Read {
    READ.get_or_init(|| parse(&|name| std::env::var_os(name).map(|v| v.to_string_lossy().into_owned())))
}

/// The variables as `get` gives them.
fn parse(get: &dyn Fn(&str) -> Option<String>) -> Read {
    let mut problems = Vec::new();
    let mut experiments = Vec::new();
    let mut word = |name: &'static str, accepted: &[&str]| -> Option<String> {
        let raw = get(name)?;
        let value = raw.trim().to_ascii_lowercase();
        if value.is_empty() {
            return None;
        }
        if accepted.is_empty() || accepted.contains(&value.as_str()) {
            experiments.push(format!("{name}={value}"));
            return Some(value);
        }
        let shown: String = raw.chars().filter(|c| !c.is_control()).take(40).collect();
        problems.push(format!("{name}={shown:?} is not understood (accepted: {}); it is ignored", accepted.join(", ")));
        None
    };
    let spans = match word(SPANS, &["steps", "unwritten", "announced"]).as_deref() {
        Some("steps") => Spans::Steps,
        Some("unwritten") => Spans::Unwritten,
        Some("announced") => Spans::Announced,
        _ => Spans::All,
    };
    let own_spans_tracing = word(OWN_SPANS, &["tracing"]).is_some();
    let attribution_off = word(ATTRIBUTION, &["off"]).is_some();
    let cupti = match word(CUPTI, &["keep", "per-cycle", "off"]).as_deref() {
        Some("keep") => Cupti::Keep,
        Some("per-cycle") => Cupti::PerCycle,
        Some("off") => Cupti::Off,
        _ => Cupti::Near,
    };
    let linger = match get(LINGER).map(|v| v.trim().to_ascii_lowercase()).filter(|v| !v.is_empty()) {
        None => Linger::Default,
        Some(v) if v == "off" => {
            experiments.push(format!("{LINGER}=off"));
            Linger::Off
        }
        Some(v) => match v.parse::<u64>() {
            Ok(us @ 10..=50_000) => {
                experiments.push(format!("{LINGER}={us}"));
                Linger::Every(us)
            }
            _ => {
                let shown: String = v.chars().filter(|c| !c.is_control()).take(40).collect();
                problems.push(format!(
                    "{LINGER}={shown:?} is not understood (accepted: off, or 10 to 50000 µs); it is ignored"
                ));
                Linger::Default
            }
        },
    };
    let cache_dir = get(CACHE_DIR).filter(|v| !v.is_empty()).map(|v| match (tilde_rest(&v), get("HOME")) {
        // A quoted `~` reaches a program unexpanded: it means the home folder, not a folder
        // named `~` here.
        (Some(rest), Some(home)) if !home.is_empty() => PathBuf::from(home).join(rest),
        (Some(_), _) => {
            problems.push(format!("{CACHE_DIR} starts with ~ but HOME is not set: the folder is taken as written"));
            PathBuf::from(v)
        }
        (None, _) => PathBuf::from(v),
    });
    let expect_lavapipe = get(EXPECT_LAVAPIPE).is_some();
    Read { spans, own_spans_tracing, linger, attribution_off, cupti, cache_dir, expect_lavapipe, problems, experiments }
}

/// What follows a leading `~` (`~` alone, or `~/...`): the path under the home folder.
fn tilde_rest(v: &str) -> Option<&str> {
    match v.strip_prefix('~')? {
        "" => Some(""),
        rest => rest.strip_prefix('/'),
    }
}

/// `STEPTRACE_SPANS`.
pub fn spans() -> Spans {
    read().spans
}

/// Whether `STEPTRACE_OWN_SPANS=tracing`.
pub fn own_spans_tracing() -> bool {
    read().own_spans_tracing
}

/// `STEPTRACE_LINGER`.
pub fn linger() -> Linger {
    read().linger
}

/// Whether `STEPTRACE_ATTRIBUTION=off`.
pub fn attribution_off() -> bool {
    read().attribution_off
}

/// `STEPTRACE_CUPTI`.
pub fn cupti() -> Cupti {
    read().cupti
}

/// `STEPTRACE_CACHE_DIR`, when set and not empty.
pub fn cache_dir() -> Option<PathBuf> {
    read().cache_dir.clone()
}

/// Whether `STEPTRACE_EXPECT_LAVAPIPE` is set.
pub fn expect_lavapipe() -> bool {
    read().expect_lavapipe
}

/// The values that were not understood, each naming its variable and what it accepts.
pub fn problems() -> Vec<String> {
    read().problems.clone()
}

/// The experiments' knobs that are set (`STEPTRACE_SPANS=unwritten`): what was measured is
/// not what a user's run measures.
pub fn experiments() -> Vec<String> {
    read().experiments.clone()
}

/// What an experiment's knob set to a value does to the run, in a few words.
fn effect(knob: &str) -> &'static str {
    let (name, value) = knob.split_once('=').unwrap_or((knob, ""));
    match (name, value) {
        (SPANS, "steps") => "only the ProfilerStep spans are kept",
        (SPANS, "unwritten") => {
            "the stepping thread's spans are made but none is written, its steps' included: no trace is saved"
        }
        (SPANS, _) => "every batch of spans is announced through tracing-chrome",
        (OWN_SPANS, _) => "steptrace's own spans go through tracing's registry",
        (LINGER, "off") => "the trace writer parks between steps",
        (LINGER, _) => "the trace writer polls at that period between steps",
        (ATTRIBUTION, _) => "kernels are not tied to ops or layers (on wgpu, none is recorded)",
        (CUPTI, "off") => "CUPTI is not used: the device's side is recorded as without libcupti",
        (CUPTI, _) => "CUPTI's kinds are enabled otherwise than by default",
        _ => "an experiment",
    }
}

/// The console's lines for [`problems`] and [`experiments`], for a run about to start.
pub fn warnings() -> Vec<String> {
    let mut out: Vec<String> = problems().into_iter().map(|p| format!("steptrace: warning: {p}")).collect();
    for knob in experiments() {
        out.push(format!(
            "steptrace: note: {knob}, an experiment's knob: {}; this run is not what a run without it is \
             (see `steptrace::settings`)",
            effect(&knob)
        ));
    }
    out
}

/// Why no trace was written although a window recorded, when an experiment's knob is the
/// reason (`STEPTRACE_SPANS=unwritten`).
pub fn why_no_trace() -> Option<String> {
    (spans() == Spans::Unwritten)
        .then(|| format!("{SPANS}=unwritten writes none of the stepping thread's spans (an experiment)"))
}

/// `path` as steptrace prints and records it: a leading home directory written `$HOME` (which
/// names no user).
pub fn home_relative(path: &std::path::Path) -> String {
    home_relative_str(&path.display().to_string())
}

/// `text` with a leading home directory written `$HOME`, as [`home_relative`].
pub fn home_relative_str(text: &str) -> String {
    match std::env::var("HOME") {
        Ok(home) if !home.is_empty() && home != "/" && text.starts_with(&home) => {
            format!("$HOME{}", &text[home.len()..])
        }
        _ => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from(pairs: &[(&str, &str)]) -> Read {
        let pairs: Vec<(String, String)> = pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        parse(&move |name| pairs.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()))
    }

    #[test]
    fn values_are_read_without_case_and_blanks() {
        let r = from(&[(SPANS, " Unwritten "), (ATTRIBUTION, "OFF"), (CUPTI, "Per-Cycle"), (LINGER, "200")]);
        assert_eq!(
            (r.spans, r.attribution_off, r.cupti, r.linger),
            (Spans::Unwritten, true, Cupti::PerCycle, Linger::Every(200))
        );
        assert!(r.problems.is_empty(), "{:?}", r.problems);
        assert_eq!(r.experiments.len(), 4, "{:?}", r.experiments);
    }

    #[test]
    fn an_unknown_value_is_named_with_what_is_accepted_and_ignored() {
        let r =
            from(&[(SPANS, "everything"), (OWN_SPANS, "direct"), (LINGER, "5"), (CUPTI, "maybe"), (ATTRIBUTION, "no")]);
        assert_eq!(
            (r.spans, r.own_spans_tracing, r.linger, r.cupti, r.attribution_off),
            (Spans::All, false, Linger::Default, Cupti::Near, false)
        );
        assert_eq!(r.problems.len(), 5, "{:?}", r.problems);
        assert!(
            r.problems[0].contains("STEPTRACE_SPANS=\"everything\"")
                && r.problems[0].contains("steps, unwritten, announced"),
            "{:?}",
            r.problems
        );
        assert!(
            r.problems.iter().any(|p| p.contains("STEPTRACE_LINGER=\"5\"") && p.contains("10 to 50000")),
            "{:?}",
            r.problems
        );
        assert!(r.experiments.is_empty());
    }

    #[test]
    fn each_knob_says_what_it_does() {
        assert!(effect("STEPTRACE_SPANS=unwritten").contains("no trace is saved"));
        assert!(effect("STEPTRACE_SPANS=steps").contains("only the ProfilerStep"));
        assert!(effect("STEPTRACE_ATTRIBUTION=off").contains("not tied"));
        assert!(effect("STEPTRACE_CUPTI=off").contains("not used"));
        assert!(effect("STEPTRACE_LINGER=200").contains("polls"));
    }

    #[test]
    fn unset_and_empty_are_the_defaults() {
        let r = from(&[(SPANS, ""), (CACHE_DIR, "")]);
        assert_eq!((r.spans, r.linger, r.cupti, r.cache_dir), (Spans::All, Linger::Default, Cupti::Near, None));
        assert!(r.problems.is_empty() && r.experiments.is_empty());
        let r = from(&[(CACHE_DIR, "/tmp/c"), (EXPECT_LAVAPIPE, "1")]);
        assert_eq!((r.cache_dir, r.expect_lavapipe), (Some(PathBuf::from("/tmp/c")), true));
    }

    #[test]
    fn home_becomes_a_variable() {
        let home = std::env::var("HOME").unwrap_or_default();
        if home.is_empty() || home == "/" {
            return;
        }
        assert_eq!(home_relative(std::path::Path::new(&format!("{home}/.cache/x"))), "$HOME/.cache/x");
        assert_eq!(home_relative(std::path::Path::new("/usr/local/cuda")), "/usr/local/cuda");
    }

    /// A quoted `~` is the home folder, as the shell would have made it; `~user` and a `~`
    /// inside a name are names.
    #[test]
    fn a_leading_tilde_is_the_home_folder() {
        let r = from(&[(CACHE_DIR, "~/sc"), ("HOME", "/home/u")]);
        assert_eq!(r.cache_dir, Some(PathBuf::from("/home/u/sc")));
        assert_eq!(from(&[(CACHE_DIR, "~"), ("HOME", "/home/u")]).cache_dir, Some(PathBuf::from("/home/u")));
        assert_eq!(from(&[(CACHE_DIR, "~other/sc"), ("HOME", "/home/u")]).cache_dir, Some(PathBuf::from("~other/sc")));
        assert_eq!(from(&[(CACHE_DIR, "a~/b"), ("HOME", "/home/u")]).cache_dir, Some(PathBuf::from("a~/b")));
        let r = from(&[(CACHE_DIR, "~/sc")]);
        assert_eq!(r.cache_dir, Some(PathBuf::from("~/sc")));
        assert!(r.problems.iter().any(|p| p.contains("HOME is not set")), "{:?}", r.problems);
    }

    #[test]
    fn every_variable_is_listed_once() {
        let mut names: Vec<&str> = VARIABLES.iter().map(|v| v.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), VARIABLES.len());
        for name in [CACHE_DIR, EXPECT_LAVAPIPE, SPANS, OWN_SPANS, LINGER, ATTRIBUTION, CUPTI] {
            assert!(names.contains(&name), "{name}");
        }
    }
}
