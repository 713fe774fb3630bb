//! Reserved device memory that grows step after step: a leak, or a pool that fragments.

use super::{Change, Context, Experiment, Hypothesis, CONFIRM};

/// Share of the compared steps that must grow reserved memory.
const RISING: f64 = 0.8;

/// Growth from the first to the last counted step, as a share of the first, that counts.
const GROWTH: f64 = 0.02;

/// The fewest steps compared.
const MIN_COMPARED: usize = 3;

pub(super) fn check(cx: &Context<'_>, found: &mut Vec<Hypothesis>) {
    let Some(m) = cx.memory else { return };
    let Some(g) = &m.reserved_growth else { return };
    if g.compared < MIN_COMPARED || (g.rising_steps as f64) < RISING * g.compared as f64 {
        return;
    }
    if g.first_mb <= 0.0 || g.last_mb < g.first_mb * (1.0 + GROWTH) {
        return;
    }
    let steps = cx.run.steps.unwrap_or(0).max((g.compared as u64).saturating_add(1));
    found.push(Hypothesis {
        id: "memory-growth",
        evidence: format!(
            "reserved device memory at the step boundary grew in {} of {} steps, from {:.1} MB to {:.1} MB (+{:.1} MB, \
             {:+.1}% per step), while in use at the highest sample stayed within {:.1}–{:.1} MB",
            g.rising_steps,
            g.compared,
            g.first_mb,
            g.last_mb,
            g.last_mb - g.first_mb,
            ((g.last_mb / g.first_mb).powf(1.0 / g.compared as f64) - 1.0) * 100.0,
            m.highest_mb.min,
            m.highest_mb.max
        ),
        hypothesis: "something is kept from step to step (a tensor held in a list, a loss kept with its graph, a \
                     growing cache), or the allocator's pools fragment so that freed pages cannot be reused: the \
                     run will end out of memory if it goes on long enough"
            .into(),
        next: format!(
            "rerun with twice the steps and `--memory`: if reserved memory keeps growing at the same rate, look for \
             what the loop keeps (losses stored as tensors, histories, caches keyed by shape); if it levels off, it \
             is the pools warming up to the step's shapes; check in-use against reserved at the highest sample to \
             tell a leak (in use grows too) from fragmentation (only reserved grows); {CONFIRM}"
        ),
        experiment: Some(Experiment::of([Change::Steps(steps.saturating_mul(2))])),
        command: None,
    });
}
