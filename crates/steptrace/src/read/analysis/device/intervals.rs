//! Sets of time intervals: unions, overlaps and differences, in µs.

/// Disjoint intervals in order: the union of what it was built from.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Set(Vec<(f64, f64)>);

impl Set {
    /// The union of `intervals`, each clipped to `[from, to]`; empty and
    /// reversed intervals are dropped.
    pub(crate) fn clipped(intervals: impl IntoIterator<Item = (f64, f64)>, from: f64, to: f64) -> Set {
        let mut v: Vec<(f64, f64)> =
            intervals.into_iter().map(|(a, b)| (a.max(from), b.min(to))).filter(|(a, b)| b > a).collect();
        v.sort_by(|x, y| x.0.total_cmp(&y.0));
        let mut out: Vec<(f64, f64)> = Vec::with_capacity(v.len());
        for (a, b) in v {
            match out.last_mut() {
                Some(last) if a <= last.1 => last.1 = last.1.max(b),
                _ => out.push((a, b)),
            }
        }
        Set(out)
    }

    /// The total length.
    pub(crate) fn len(&self) -> f64 {
        self.0.iter().map(|(a, b)| b - a).sum()
    }

    /// `[from, to]` without this set.
    pub(crate) fn complement(&self, from: f64, to: f64) -> Set {
        let mut out = Vec::new();
        let mut at = from;
        for &(a, b) in &self.0 {
            if a > at {
                out.push((at, a.min(to)));
            }
            at = at.max(b);
        }
        if to > at {
            out.push((at, to));
        }
        Set(out.into_iter().filter(|(a, b)| b > a).collect())
    }

    /// What this set and `other` share.
    pub(crate) fn intersect(&self, other: &Set) -> Set {
        let (mut i, mut j, mut out) = (0, 0, Vec::new());
        while i < self.0.len() && j < other.0.len() {
            let (a, b) = (self.0[i], other.0[j]);
            let (lo, hi) = (a.0.max(b.0), a.1.min(b.1));
            if hi > lo {
                out.push((lo, hi));
            }
            if a.1 < b.1 {
                i += 1;
            } else {
                j += 1;
            }
        }
        Set(out)
    }

    /// This set without `other`.
    pub(crate) fn minus(&self, other: &Set) -> Set {
        let (Some(first), Some(last)) = (self.0.first(), self.0.last()) else { return Set::default() };
        self.intersect(&other.complement(first.0, last.1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn union_clips_and_merges() {
        let s = Set::clipped([(5.0, 8.0), (0.0, 2.0), (1.0, 3.0), (9.0, 9.0), (7.0, 20.0)], 1.0, 10.0);
        assert_eq!(s, Set(vec![(1.0, 3.0), (5.0, 10.0)]));
        assert_eq!(s.len(), 7.0);
    }

    #[test]
    fn complement_intersect_and_minus() {
        let busy = Set::clipped([(2.0, 4.0), (6.0, 7.0)], 0.0, 10.0);
        let idle = busy.complement(0.0, 10.0);
        assert_eq!(idle, Set(vec![(0.0, 2.0), (4.0, 6.0), (7.0, 10.0)]));
        assert_eq!(idle.len() + busy.len(), 10.0);
        let host = Set::clipped([(1.0, 5.0)], 0.0, 10.0);
        assert_eq!(idle.intersect(&host), Set(vec![(1.0, 2.0), (4.0, 5.0)]));
        assert_eq!(idle.minus(&host), Set(vec![(0.0, 1.0), (5.0, 6.0), (7.0, 10.0)]));
        assert_eq!(Set::default().complement(0.0, 3.0).len(), 3.0);
    }
}
