//! Sorting the report's large vectors (spans, device work) in place.

use std::cmp::Ordering;

/// Sorts `items` stably by `cmp`, as `sort_by` does, with the scratch of one
/// index per item rather than a copy of half the items: the items are
/// large, and counted in millions in a long trace.
pub(crate) fn sort_stable_by<T>(items: &mut [T], mut cmp: impl FnMut(&T, &T) -> Ordering) {
    let mut order: Vec<usize> = (0..items.len()).collect();
    // The index breaks ties: the stable order, without a stable sort's scratch.
    order.sort_unstable_by(|&a, &b| cmp(&items[a], &items[b]).then(a.cmp(&b)));
    // Position `i` takes the item at `order[i]`: each cycle of the
    // permutation is followed once, and marked done as it goes.
    for start in 0..items.len() {
        let mut at = start;
        loop {
            let from = std::mem::replace(&mut order[at], usize::MAX);
            if from == usize::MAX || from == start {
                break;
            }
            items.swap(at, from);
            at = from;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts_as_the_stable_sort_does() {
        let mut seed = 7u64;
        for len in [0, 1, 2, 3, 10, 100, 1000] {
            let items: Vec<(u8, usize)> = (0..len)
                .map(|i| {
                    seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                    ((seed >> 60) as u8, i)
                })
                .collect();
            let mut expected = items.clone();
            expected.sort_by_key(|item| item.0);
            let mut got = items;
            sort_stable_by(&mut got, |a, b| a.0.cmp(&b.0));
            assert_eq!(got, expected, "{len}");
        }
    }
}
