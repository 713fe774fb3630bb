//! The cold start of a run, itemised: what the set-up before step 0 and the
//! first step spent on creating the device client, compiling kernels and
//! autotuning, and the rest ([`ColdStart`]; every figure a [`Figure`], and
//! each [`StartupPhase`] adding up).

use serde::{Deserialize, Serialize};

/// A measured value, or why there is none (a runtime that logs no end of a
/// compile, a logger slot already taken). An absent figure is never written
/// as 0: it is written as the reason's string, a value as the bare value.
///
/// ```
/// use steptrace::format::Figure;
/// let ms: Figure<f64> = Figure::Known(12.5);
/// let none: Figure<f64> = Figure::absent("not measured: no end event");
/// assert_eq!(serde_json::to_string(&ms).unwrap(), "12.5");
/// assert_eq!(serde_json::to_string(&none).unwrap(), "\"not measured: no end event\"");
/// assert_eq!(ms.known(), Some(&12.5));
/// assert_eq!(none.known(), None);
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Figure<T> {
    /// The value.
    Known(T),
    /// Not measured; why.
    Absent(String),
}

impl<T> Figure<T> {
    /// An absent figure with its reason.
    pub fn absent(why: impl Into<String>) -> Figure<T> {
        Figure::Absent(why.into())
    }

    /// The value, if there is one.
    pub fn known(&self) -> Option<&T> {
        match self {
            Figure::Known(v) => Some(v),
            Figure::Absent(_) => None,
        }
    }

    /// The reason, if the figure is absent.
    pub fn reason(&self) -> Option<&str> {
        match self {
            Figure::Known(_) => None,
            Figure::Absent(why) => Some(why),
        }
    }
}

/// The cold start of a run: the set-up before step 0 and step 0 itself,
/// each itemised, and what cubecl's persistent caches gave this run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ColdStart {
    /// Where the figures come from: which events mark each item.
    pub source: String,
    /// From the start of the run to step 0 (data, loader, device client,
    /// model initialisation).
    pub setup: StartupPhase,
    /// Step 0.
    pub first_step: StartupPhase,
    /// Whether this run's kernels and autotune results came from cubecl's
    /// persistent caches.
    pub cache: CacheUse,
}

/// One phase of the start, itemised.
///
/// The items are disjoint parts of the phase's wall time, so that
/// `client_ms + autotune.ms + compile.outside_autotune_ms + rest_ms == ms`
/// ([`parts`](Self::parts)): compilation that happens while autotune runs
/// (its candidate kernels) is counted in autotune and shown as
/// [`CompileItems::in_autotune_ms`]. An item that cannot be measured is left
/// in `rest_ms`, and [`rest_includes`](Self::rest_includes) says so.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StartupPhase {
    /// The phase's wall time, ms.
    pub ms: f64,
    /// Creating the device client (the CUDA context, streams and memory
    /// pools; the wgpu device), ms. Set-up only: the client exists before
    /// step 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_ms: Option<Figure<f64>>,
    /// Kernel compilation.
    pub compile: CompileItems,
    /// Autotune runs.
    pub autotune: AutotuneItems,
    /// The phase's wall time minus the items, ms.
    pub rest_ms: f64,
    /// What `rest_ms` still holds because it could not be measured apart.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rest_includes: Vec<String>,
}

/// Kernels compiled in a phase.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CompileItems {
    /// Kernels compiled (not found in any cache).
    pub kernels: Figure<u64>,
    /// Kernels taken from cubecl's persistent compilation cache instead.
    pub cache_hits: Figure<u64>,
    /// Wall time during which a compile ran, ms.
    pub ms: Figure<f64>,
    /// When `ms` is absent: a bound it cannot exceed, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ms_upper_bound: Option<f64>,
    /// The part of `ms` that ran inside autotune (its candidates), ms.
    pub in_autotune_ms: Figure<f64>,
    /// The part of `ms` outside autotune: the item that adds up, ms.
    pub outside_autotune_ms: Figure<f64>,
}

/// Autotune runs in a phase.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AutotuneItems {
    /// Autotune runs that benchmarked candidates (cache misses).
    pub runs: Figure<u64>,
    /// Results taken from cubecl's persistent autotune cache instead.
    pub cache_hits: Figure<u64>,
    /// Wall time during which an autotune ran, ms.
    pub ms: Figure<f64>,
}

/// What cubecl's persistent caches gave this run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CacheUse {
    /// `cold` (nothing came from a cache), `partly warm`, `warm` (nothing
    /// had to be compiled or tuned that a cache could have held), or a
    /// `not observed: ...` reason.
    pub label: String,
    /// What the label rests on.
    pub basis: String,
}

// === impl StartupPhase ===

impl StartupPhase {
    /// The items and the rest, as `(name, ms)`, in the order they add up to
    /// [`ms`](StartupPhase::ms); absent items are left out (they are in the
    /// rest).
    pub fn parts(&self) -> Vec<(&'static str, f64)> {
        let mut parts = Vec::new();
        if let Some(Figure::Known(x)) = &self.client_ms {
            parts.push(("device client", *x));
        }
        if let Figure::Known(x) = &self.autotune.ms {
            parts.push(("autotune", *x));
        }
        if let Figure::Known(x) = &self.compile.outside_autotune_ms {
            parts.push(("compile", *x));
        }
        parts.push(("rest", self.rest_ms));
        parts
    }

    /// One line: the phase's time as the sum of its items, each with its
    /// counts, e.g. `first step 812.0 ms = autotune 300.0 ms (2 runs, 0 from
    /// the cache) + compile 400.0 ms (12 kernels) + rest 112.0 ms`. Items
    /// with nothing in them are left out; absent ones are kept, with their
    /// reason.
    pub fn line(&self, name: &str) -> String {
        let mut items = Vec::new();
        if let Some(client) = &self.client_ms {
            items.push(format!("device client {}", ms_or(client)));
        }
        let tune = &self.autotune;
        if !(is_zero(&tune.ms) && tune.runs == Figure::Known(0) && tune.cache_hits.known().is_none_or(|h| *h == 0)) {
            items.push(format!(
                "autotune {} ({} runs{})",
                ms_or(&tune.ms),
                count_or(&tune.runs),
                from_cache(&tune.cache_hits)
            ));
        }
        let c = &self.compile;
        let empty = c.kernels == Figure::Known(0) && c.cache_hits.known().is_none_or(|h| *h == 0);
        if !(empty && is_zero(&c.ms)) {
            let mut compile = format!(
                "compile {} ({} kernels{}",
                ms_or(&c.outside_autotune_ms),
                count_or(&c.kernels),
                from_cache(&c.cache_hits)
            );
            if let Figure::Known(inside) = &c.in_autotune_ms {
                if *inside > 0.0 {
                    compile.push_str(&format!("; {inside:.1} ms more inside autotune"));
                }
            }
            if let Some(bound) = c.ms_upper_bound {
                compile.push_str(&format!("; at most {bound:.1} ms"));
            }
            compile.push(')');
            items.push(compile);
        }
        let mut rest = format!("rest {:.1} ms", self.rest_ms);
        if !self.rest_includes.is_empty() {
            rest.push_str(&format!(" (includes {})", self.rest_includes.join("; ")));
        }
        items.push(rest);
        format!("{name} {:.1} ms = {}", self.ms, items.join(" + "))
    }
}

// === impl ColdStart ===

impl ColdStart {
    /// The breakdown as text lines (first step, set-up, cache, source), for
    /// a console or a report.
    pub fn lines(&self) -> Vec<String> {
        vec![
            self.first_step.line("first step"),
            self.setup.line("setup"),
            format!("cubecl cache for this run: {} ({})", self.cache.label, self.cache.basis),
            format!("source: {}", self.source),
        ]
    }
}

fn ms_or(f: &Figure<f64>) -> String {
    match f {
        Figure::Known(x) => format!("{x:.1} ms"),
        Figure::Absent(why) => why.clone(),
    }
}

fn is_zero(f: &Figure<f64>) -> bool {
    f.known().is_some_and(|x| *x == 0.0)
}

/// `, N from the cache`; nothing where no cache applies; the reason where hits were not
/// observed.
fn from_cache(f: &Figure<u64>) -> String {
    match f {
        Figure::Known(n) => format!(", {n} from the cache"),
        Figure::Absent(why) if why.starts_with("not applicable") => String::new(),
        Figure::Absent(why) => format!(", cache hits {why}"),
    }
}

fn count_or(f: &Figure<u64>) -> String {
    match f {
        Figure::Known(n) => n.to_string(),
        Figure::Absent(_) => "?".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn phase() -> StartupPhase {
        StartupPhase {
            ms: 100.0,
            client_ms: None,
            compile: CompileItems {
                kernels: Figure::Known(4),
                cache_hits: Figure::absent("not applicable: no compilation cache"),
                ms: Figure::Known(50.0),
                ms_upper_bound: None,
                in_autotune_ms: Figure::Known(10.0),
                outside_autotune_ms: Figure::Known(40.0),
            },
            autotune: AutotuneItems { runs: Figure::Known(1), cache_hits: Figure::Known(0), ms: Figure::Known(30.0) },
            rest_ms: 30.0,
            rest_includes: vec![],
        }
    }

    #[test]
    fn figures_are_values_or_reasons_and_read_back() {
        let p = phase();
        let v = serde_json::to_value(&p).unwrap();
        assert_eq!(v["compile"]["kernels"], json!(4));
        assert_eq!(v["compile"]["cache_hits"], json!("not applicable: no compilation cache"));
        assert!(v.get("client_ms").is_none());
        let back: StartupPhase = serde_json::from_value(v).unwrap();
        assert_eq!(back, p);
        // A whole number of ms reads back as a float figure.
        let f: Figure<f64> = serde_json::from_value(json!(3)).unwrap();
        assert_eq!(f, Figure::Known(3.0));
    }

    #[test]
    fn parts_add_up_to_the_phase() {
        let p = phase();
        let sum: f64 = p.parts().iter().map(|(_, ms)| ms).sum();
        assert_eq!(sum, p.ms);
        let line = p.line("first step");
        assert!(line.starts_with("first step 100.0 ms = autotune 30.0 ms (1 runs, 0 from the cache)"), "{line}");
        assert!(line.contains("compile 40.0 ms (4 kernels; 10.0 ms more inside autotune)"), "{line}");
        assert!(line.ends_with("rest 30.0 ms"), "{line}");
    }

    #[test]
    fn an_absent_item_stays_in_the_rest_and_says_so() {
        let mut p = phase();
        p.compile.ms = Figure::absent("not measured: no end event");
        p.compile.outside_autotune_ms = p.compile.ms.clone();
        p.compile.in_autotune_ms = p.compile.ms.clone();
        p.compile.ms_upper_bound = Some(60.0);
        p.rest_ms = 70.0;
        p.rest_includes = vec!["the compilation of 4 kernels".into()];
        assert_eq!(p.parts().iter().map(|(_, ms)| ms).sum::<f64>(), 100.0);
        let line = p.line("first step");
        assert!(line.contains("compile not measured: no end event (4 kernels;"), "{line}");
        assert!(line.contains("at most 60.0 ms"), "{line}");
        assert!(line.ends_with("rest 70.0 ms (includes the compilation of 4 kernels)"), "{line}");
        // Nothing compiled or tuned: only the rest (and the client, when there is one).
        let mut idle = phase();
        idle.compile.kernels = Figure::Known(0);
        idle.compile.ms = Figure::Known(0.0);
        idle.autotune = AutotuneItems { runs: Figure::Known(0), cache_hits: Figure::Known(0), ms: Figure::Known(0.0) };
        idle.client_ms = Some(Figure::Known(12.0));
        assert_eq!(idle.line("setup"), "setup 100.0 ms = device client 12.0 ms + rest 30.0 ms");
    }
}
