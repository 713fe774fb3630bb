//! Pairing CUPTI's launches with the launches cubecl's observer saw.
//!
//! cubecl tells its observer of a launch just before the launch reaches the device thread,
//! which calls the driver in the same order; CUPTI numbers the driver calls (its correlation
//! ids) in the order they are made. Both sequences are in launch order, so they are paired in
//! order, checking that the names agree: CUPTI's name is cubecl's kernel name, formatted,
//! with a hash (`reduce_kernel_in_f32_…_24f41dc6` for `…::reduce_kernel<f32, …>`). A launch
//! one side has and the other lacks (a window edge, a launch not issued through cubecl) is
//! skipped over, never paired with a neighbour.

/// How far ahead a pairing looks for a kernel whose name agrees.
const LOOKAHEAD: usize = 64;

/// The identifier a CUPTI name starts with, of cubecl's kernel name: the last path segment,
/// before its generic arguments (`cubecl_reduce::shared::reduce_kernel<f32>` gives
/// `reduce_kernel`).
pub(crate) fn base_name(kernel: &str) -> &str {
    let before_generics = kernel.split('<').next().unwrap_or(kernel);
    before_generics
        .rsplit("::")
        .next()
        .unwrap_or(before_generics)
        .trim()
}

fn agrees(cupti: &str, observed: &str) -> bool {
    let base = base_name(observed);
    base.is_empty()
        || cupti
            .strip_prefix(base)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('_'))
}

/// For each CUPTI launch (in correlation order, with its kernel's name), the index of the
/// observed launch it is, if one agrees.
pub(crate) fn align(cupti: &[&str], observed: &[&str]) -> Vec<Option<usize>> {
    let mut next = 0;
    cupti
        .iter()
        .map(|name| {
            let end = (next + LOOKAHEAD).min(observed.len());
            let found = (next..end).find(|&j| agrees(name, observed[j]));
            if let Some(j) = found {
                next = j + 1;
            }
            found
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_agree_by_their_base() {
        assert_eq!(
            base_name("cubecl_reduce::shared::reduce_kernel<f32, 4>"),
            "reduce_kernel"
        );
        assert!(agrees(
            "reduce_kernel_in_f32_in_size_4_24f41dc6",
            "a::reduce_kernel<f32>"
        ));
        assert!(!agrees("reduce_kernel_in_f32", "a::copy_kernel<f32>"));
        assert!(
            !agrees("matmulx_1", "a::matmul"),
            "a prefix must end at an underscore"
        );
    }

    #[test]
    fn launches_pair_in_order_and_skip_what_one_side_lacks() {
        let observed = [
            "k::copy_kernel",
            "k::matmul_entry<f32>",
            "k::elemwise_fuse",
            "k::reduce_kernel<f32>",
            "k::elemwise_fuse",
        ];
        // The first observed launch happened before CUPTI's window; CUPTI saw a memset-like
        // kernel the observer did not.
        let cupti = [
            "matmul_entry_lhs_f32_5c163ddd",
            "other_kernel_1",
            "elemwise_fuse_92092e62",
            "reduce_kernel_in_f32_4fa17179",
            "elemwise_fuse_500368f3",
        ];
        assert_eq!(
            align(&cupti, &observed),
            vec![Some(1), None, Some(2), Some(3), Some(4)]
        );
        assert_eq!(align(&cupti, &[]), vec![None; 5]);
    }
}
