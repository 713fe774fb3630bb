//! What is wrong with the input, as the report's warnings: the reader's
//! [`validate`](crate::read::reader::validate) on each file, steps written twice or nested, and steps that
//! recur across files. Each warning says what the report did about it.

use std::collections::{BTreeMap, HashMap};

use super::device::DeviceIssues;
use super::loaded::Loaded;
use super::steps::StepIssues;
use crate::display::label;
use crate::read::reader::{Problem, ProblemKind, MAX_PLAUSIBLE_DUR_US, MAX_PLAUSIBLE_TS_US};

/// The longest a quoted problem runs in a warning.
const QUOTE_CHARS: usize = 240;

/// What a kind of problem is, in a warning, and what the report does.
fn describe(kind: ProblemKind) -> Option<(String, &'static str)> {
    let text = match kind {
        // Said by the source line ("cut short").
        ProblemKind::Truncated => return None,
        ProblemKind::InvalidTimestamp => ("without a finite timestamp (ts)".to_owned(), "left out of every figure"),
        ProblemKind::InvalidDuration => {
            ("with a missing, negative or non-finite duration (dur)".to_owned(), "left out of every figure")
        }
        ProblemKind::ImplausibleTime => (
            format!("with a time no trace can hold (ts beyond ±{MAX_PLAUSIBLE_TS_US:e} µs or dur beyond {MAX_PLAUSIBLE_DUR_US:e} µs)"),
            "left out of every figure",
        ),
        ProblemKind::UnknownPhase => ("of no known phase (ph)".to_owned(), "ignored"),
        ProblemKind::UnmatchedEnd | ProblemKind::MismatchedEnd | ProblemKind::UnclosedBegin => (
            "whose begin/end pairs do not nest in time order".to_owned(),
            "spans are paired in file order, which may differ from what a viewer shows",
        ),
        _ => ("that a viewer may not show as written".to_owned(), "read as they are"),
    };
    Some(text)
}

/// The validator's problems of one file ([`validate`](crate::read::reader::validate)), by kind: how many,
/// and the first, as the problems come one by one.
#[derive(Clone, Debug, Default)]
pub(crate) struct ProblemCounts {
    kinds: Vec<KindCount>,
    /// Problems counted so far.
    seen: usize,
}

#[derive(Clone, Debug)]
struct KindCount {
    count: usize,
    /// The first problem of the kind, and where it stands among the
    /// problems sorted by event (stably: then in the order they came).
    first: ((Option<usize>, usize), Problem),
}

impl ProblemCounts {
    /// Counts the next problem.
    pub(crate) fn add(&mut self, problem: Problem) {
        let order = (problem.event_index, self.seen);
        self.seen += 1;
        match self.kinds.iter_mut().find(|k| k.first.1.kind == problem.kind) {
            Some(k) => {
                k.count += 1;
                if order < k.first.0 {
                    k.first = (order, problem);
                }
            }
            None => self.kinds.push(KindCount { count: 1, first: (order, problem) }),
        }
    }
}

/// Warnings about the file at `path`, from its validator's `problems`: one
/// per kind of problem, with a count and the first instance.
pub(crate) fn trace_warnings(path: &str, problems: &ProblemCounts, truncated: bool, out: &mut Vec<String>) {
    type Group<'a> = (usize, &'static str, &'a ((Option<usize>, usize), Problem));
    let mut by_kind: BTreeMap<String, Group<'_>> = BTreeMap::new();
    for k in &problems.kinds {
        // A cut file leaves spans open: the source line says so.
        let cut_open = matches!(k.first.1.kind, ProblemKind::UnclosedBegin | ProblemKind::UnclosedAsyncBegin);
        if truncated && cut_open {
            continue;
        }
        let Some((what, action)) = describe(k.first.1.kind) else { continue };
        let group = by_kind.entry(what).or_insert((0, action, &k.first));
        group.0 += k.count;
        if k.first.0 < group.2 .0 {
            group.2 = &k.first;
        }
    }
    for (what, (count, action, (_, first))) in by_kind {
        let first = label(&first.to_string(), QUOTE_CHARS).into_owned();
        out.push(format!("{path}: {count} event(s) {what}, first {first}; {action}"));
    }
}

/// Warnings about the kernel events of the file at `path` that cannot be as written (see
/// [`DeviceIssues`]): what each is, how many, the first, and what the report did.
pub(crate) fn device_warnings(path: &str, issues: &DeviceIssues, out: &mut Vec<String>) {
    if !issues.any() {
        return;
    }
    let first = |found: &super::device::Found| {
        found
            .first
            .as_ref()
            .map_or_else(String::new, |e| format!(", first `{}` at ts {} µs", label(&e.name, QUOTE_CHARS), e.ts))
    };
    let r = &issues.repeated;
    if r.count > 0 {
        out.push(format!(
            "{path}: {} kernel event(s) repeat an earlier one (the same device, stream, name, start and duration, or \
             the same correlation id and name){}: duplicated input; each kernel is counted once, the copies are left \
             out of every figure",
            r.count,
            first(r)
        ));
    }
    let o = &issues.overlapping;
    if o.count > 0 {
        out.push(format!(
            "{path}: {} kernel(s) start before the previous kernel on their stream ended ({} stream(s){}): a CUDA \
             stream runs its kernels one at a time, so these times are impossible; the kernel figures (sums, means, \
             calls per step) rest on inconsistent input, and shares are elapsed time, never above 100%",
            o.count,
            issues.overlapping_streams,
            first(o)
        ));
    }
    let c = &issues.shared_correlation;
    if c.count > 0 {
        out.push(format!(
            "{path}: {} kernel(s) carry the correlation id of a single-kernel launch that another kernel carries \
             too{}: one launch runs one kernel, so the kernel and launch figures rest on inconsistent input",
            c.count,
            first(c)
        ));
    }
    let b = &issues.before_launch;
    if b.count > 0 {
        out.push(format!(
            "{path}: {} kernel(s) start before the call that launched them (by up to {:.1} µs{}): the host's and the \
             device's clocks disagree, or the input is inconsistent; they are left out of launch-to-start",
            b.count,
            -issues.earliest_us,
            first(b)
        ));
    }
}

/// Warnings about the steps [`steps_of`](super::steps::steps_of) set
/// aside in the file at `path`.
pub(crate) fn step_warnings(path: &str, issues: &StepIssues, out: &mut Vec<String>) {
    if !issues.duplicates.is_empty() {
        let list: Vec<String> = issues.duplicates.iter().take(8).map(|(step, n)| format!("#{step} ×{n}")).collect();
        let more = issues.duplicates.len().saturating_sub(8);
        let more = if more > 0 { format!(" and {more} more") } else { String::new() };
        out.push(format!(
            "{path}: {} step number(s) written more than once ({}{more}): each is counted once, with its longest span",
            issues.duplicates.len(),
            list.join(", ")
        ));
    }
    if !issues.overlapping.is_empty() {
        let list: Vec<String> = issues.overlapping.iter().take(8).map(|s| format!("#{s}")).collect();
        out.push(format!(
            "{path}: {} ProfilerStep span(s) start inside an earlier step on their thread ({}{}): steps follow each \
             other, so these are left out",
            issues.overlapping.len(),
            list.join(", "),
            if issues.overlapping.len() > 8 { ", …" } else { "" }
        ));
    }
    if issues.out_of_order {
        out.push(format!(
            "{path}: step numbers do not follow time order: the window is measured from the earliest step start to \
             the latest step end"
        ));
    }
}

/// Steps whose number appears in more than one file: kept in the first
/// file only, with a warning.
pub(crate) fn cross_file_duplicates(loaded: &mut [Loaded], paths: &[&str], out: &mut Vec<String>) {
    let mut first_file: HashMap<u64, usize> = HashMap::new();
    let mut repeated: BTreeMap<(usize, usize), Vec<u64>> = BTreeMap::new();
    for (i, l) in loaded.iter_mut().enumerate() {
        l.steps.retain(|row| match first_file.get(&row.step) {
            Some(&first) => {
                repeated.entry((first, i)).or_default().push(row.step);
                false
            }
            None => {
                first_file.insert(row.step, i);
                true
            }
        });
    }
    for ((first, later), steps) in repeated {
        let shown: Vec<String> = steps.iter().take(8).map(|s| format!("#{s}")).collect();
        out.push(format!(
            "{} holds {} step(s) that {} also holds ({}{}): counted once, from {}",
            paths.get(later).copied().unwrap_or("?"),
            steps.len(),
            paths.get(first).copied().unwrap_or("?"),
            shown.join(", "),
            if steps.len() > 8 { ", …" } else { "" },
            paths.get(first).copied().unwrap_or("?"),
        ));
    }
}
