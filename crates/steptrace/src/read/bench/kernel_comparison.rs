//! Two sides' kernels compared: every kernel name of either side, ranked
//! by the change of its device time per step and matched by exact name,
//! and the [classes](KernelClass#rules) that stay comparable when the names
//! do not match.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use super::kernels::{KernelClass, KernelRecord, KernelSummary, KernelSummaryRow, MATCH_SHARE};

/// Two sides' kernels: each side as recorded, and their comparison when
/// both observed kernels.
#[derive(Clone, Debug, Serialize)]
pub struct KernelOutcome {
    /// Side A.
    pub a: KernelRecord,
    /// Side B.
    pub b: KernelRecord,
    /// The comparison; `None` when either side has no kernels.
    pub comparison: Option<KernelComparison>,
    /// What to keep in mind (runs without kernels).
    pub notes: Vec<String>,
}

/// B's kernels against A's.
#[derive(Clone, Debug, Serialize)]
pub struct KernelComparison {
    /// A's totals.
    pub a: KernelTotals,
    /// B's totals.
    pub b: KernelTotals,
    /// B's device busy per step minus A's, ms.
    pub busy_change_ms_per_step: f64,
    /// How far the names match.
    pub names: NameMatch,
    /// Every name of either side, the largest absolute change first.
    pub rows: Vec<KernelChange>,
    /// Per class present on either side, the largest absolute change first.
    pub classes: Vec<ClassChange>,
}

/// One side's totals, per step.
#[derive(Clone, Debug, Serialize)]
pub struct KernelTotals {
    /// Steps counted.
    pub steps: usize,
    /// Kernels per step.
    pub kernels_per_step: f64,
    /// Device busy, ms.
    pub busy_ms_per_step: f64,
    /// Sum of kernel durations, ms.
    pub kernel_ms_per_step: f64,
    /// Distinct names listed.
    pub names: usize,
    /// Kernel time of names beyond the listed ones, ms (their class is
    /// unknown).
    pub unlisted_ms_per_step: f64,
}

/// Which names both sides share.
#[derive(Clone, Debug, Serialize)]
pub struct NameMatch {
    /// Names on both sides.
    pub common: usize,
    /// Names only in A.
    pub only_a: usize,
    /// Names only in B.
    pub only_b: usize,
    /// Share of A's kernel time in the common names.
    pub common_share_a: f64,
    /// Share of B's kernel time in the common names.
    pub common_share_b: f64,
    /// Whether the common names carry at least [`MATCH_SHARE`] of each
    /// side's kernel time: only then is a per-name comparison meaningful.
    pub matched: bool,
}

/// One kernel name across the two sides.
#[derive(Clone, Debug, Serialize)]
pub struct KernelChange {
    /// The name.
    pub name: String,
    /// Its class.
    pub class: KernelClass,
    /// A's device time per step, ms; `None` if A has no such kernel.
    pub a_ms_per_step: Option<f64>,
    /// B's.
    pub b_ms_per_step: Option<f64>,
    /// B − A, ms per step (a missing side counts 0).
    pub change_ms_per_step: f64,
    /// A's calls per step.
    pub a_calls_per_step: Option<f64>,
    /// B's.
    pub b_calls_per_step: Option<f64>,
}

/// One class across the two sides.
#[derive(Clone, Debug, Serialize)]
pub struct ClassChange {
    /// The class.
    pub class: KernelClass,
    /// A's device time per step in it, ms.
    pub a_ms_per_step: f64,
    /// B's.
    pub b_ms_per_step: f64,
    /// B − A, ms per step.
    pub change_ms_per_step: f64,
    /// A's calls per step in it.
    pub a_calls_per_step: f64,
    /// B's.
    pub b_calls_per_step: f64,
    /// A's distinct names in it.
    pub a_names: usize,
    /// B's.
    pub b_names: usize,
}

/// Compares B's kernels against A's: every name of either side, ranked by
/// the absolute change of its device time per step, matched by exact name,
/// and per [class](KernelClass#rules); `None` for the comparison when
/// either side has no kernels.
#[must_use]
pub fn compare_kernels(a: KernelRecord, b: KernelRecord) -> KernelOutcome {
    let comparison = match (a.summary(), b.summary()) {
        (Some(sa), Some(sb)) => Some(KernelComparison::new(sa, sb)),
        _ => None,
    };
    KernelOutcome { a, b, comparison, notes: Vec::new() }
}

impl KernelComparison {
    /// B's kernels against A's.
    #[must_use]
    pub fn new(a: &KernelSummary, b: &KernelSummary) -> KernelComparison {
        let ia: HashMap<&str, &KernelSummaryRow> = a.rows.iter().map(|r| (r.name.as_str(), r)).collect();
        let ib: HashMap<&str, &KernelSummaryRow> = b.rows.iter().map(|r| (r.name.as_str(), r)).collect();
        let common = ia.keys().filter(|n| ib.contains_key(*n)).count();
        let share = |s: &KernelSummary, other: &HashMap<&str, &KernelSummaryRow>| {
            let total = s.rows.iter().map(|r| r.ms_per_step).sum::<f64>() + s.others_ms_per_step;
            // A fold from +0.0: an empty `sum` of f64 is −0.0.
            let shared =
                s.rows.iter().filter(|r| other.contains_key(r.name.as_str())).fold(0.0, |t, r| t + r.ms_per_step);
            if total > 0.0 {
                shared / total
            } else {
                0.0
            }
        };
        let (common_share_a, common_share_b) = (share(a, &ib), share(b, &ia));
        let names = NameMatch {
            common,
            only_a: ia.len() - common,
            only_b: ib.len() - common,
            common_share_a,
            common_share_b,
            matched: common_share_a >= MATCH_SHARE && common_share_b >= MATCH_SHARE,
        };
        let mut rows: Vec<KernelChange> = a
            .rows
            .iter()
            .chain(b.rows.iter().filter(|r| !ia.contains_key(r.name.as_str())))
            .map(|r| {
                let (ra, rb) = (ia.get(r.name.as_str()), ib.get(r.name.as_str()));
                let ms = |x: Option<&&KernelSummaryRow>| x.map(|x| x.ms_per_step);
                let calls = |x: Option<&&KernelSummaryRow>| x.map(|x| x.calls_per_step);
                KernelChange {
                    name: r.name.clone(),
                    class: KernelClass::of(&r.name),
                    a_ms_per_step: ms(ra),
                    b_ms_per_step: ms(rb),
                    change_ms_per_step: ms(rb).unwrap_or(0.0) - ms(ra).unwrap_or(0.0),
                    a_calls_per_step: calls(ra),
                    b_calls_per_step: calls(rb),
                }
            })
            .collect();
        rows.sort_by(|x, y| {
            y.change_ms_per_step.abs().total_cmp(&x.change_ms_per_step.abs()).then_with(|| x.name.cmp(&y.name))
        });
        KernelComparison {
            a: totals(a),
            b: totals(b),
            busy_change_ms_per_step: b.busy_ms_per_step - a.busy_ms_per_step,
            names,
            rows,
            classes: classes(a, b),
        }
    }
}

fn totals(s: &KernelSummary) -> KernelTotals {
    KernelTotals {
        steps: s.steps,
        kernels_per_step: s.kernels_per_step,
        busy_ms_per_step: s.busy_ms_per_step,
        kernel_ms_per_step: s.kernel_ms_per_step,
        names: s.rows.len(),
        unlisted_ms_per_step: s.others_ms_per_step,
    }
}

/// Per class: each side's device time, calls and names.
fn classes(a: &KernelSummary, b: &KernelSummary) -> Vec<ClassChange> {
    let mut by: BTreeMap<KernelClass, ClassChange> = BTreeMap::new();
    for (side, s) in [(0, a), (1, b)] {
        for r in &s.rows {
            let class = KernelClass::of(&r.name);
            let c = by.entry(class).or_insert(ClassChange {
                class,
                a_ms_per_step: 0.0,
                b_ms_per_step: 0.0,
                change_ms_per_step: 0.0,
                a_calls_per_step: 0.0,
                b_calls_per_step: 0.0,
                a_names: 0,
                b_names: 0,
            });
            let (ms, calls, names) = if side == 0 {
                (&mut c.a_ms_per_step, &mut c.a_calls_per_step, &mut c.a_names)
            } else {
                (&mut c.b_ms_per_step, &mut c.b_calls_per_step, &mut c.b_names)
            };
            *ms += r.ms_per_step;
            *calls += r.calls_per_step;
            *names += 1;
        }
    }
    let mut out: Vec<ClassChange> = by
        .into_values()
        .map(|mut c| {
            c.change_ms_per_step = c.b_ms_per_step - c.a_ms_per_step;
            c
        })
        .collect();
    out.sort_by(|x, y| {
        y.change_ms_per_step.abs().total_cmp(&x.change_ms_per_step.abs()).then_with(|| x.class.cmp(&y.class))
    });
    out
}
