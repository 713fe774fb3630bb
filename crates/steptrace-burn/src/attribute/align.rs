//! Pairing CUPTI's launches with the launches cubecl's observer saw.
//!
//! cubecl tells its observer of a launch just before the launch reaches the device thread,
//! which calls the driver in the same order; CUPTI numbers the driver calls (its correlation
//! ids) in the order they are made. Both sequences are in launch order, so they are paired in
//! order, checking that the names agree: CUPTI's name is the kernel function's name with its
//! generic arguments and a hash (`reduce_kernel_in_f32_…_24f41dc6`), the observer's is the type
//! cubecl's macro makes of that function (`…::ReduceKernel<f32, …>`). A launch one side has
//! and the other lacks (a window edge, a launch not issued through cubecl) is skipped over,
//! never paired with a neighbour.

/// How far ahead a pairing looks for a kernel whose name agrees.
const LOOKAHEAD: usize = 64;

/// The identifier a CUPTI name starts with, of cubecl's kernel name: the last path segment,
/// before its generic arguments, in snake case (`cubecl_reduce::shared::ReduceKernel<f32>`
/// gives `reduce_kernel`, `DirectConv2dKernel` gives `direct_conv2d_kernel`).
pub(crate) fn base_name(kernel: &str) -> String {
    let before_generics = kernel.split('<').next().unwrap_or(kernel);
    let last = before_generics.rsplit("::").next().unwrap_or(before_generics).trim();
    let mut out = String::with_capacity(last.len() + 4);
    for (i, c) in last.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 && !out.ends_with('_') {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

fn agrees(cupti: &str, observed: &str) -> bool {
    let base = base_name(observed);
    base.is_empty() || cupti.strip_prefix(base.as_str()).is_some_and(|rest| rest.is_empty() || rest.starts_with('_'))
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

/// For each host-to-device copy (in stream order, with its bytes), the index of the tensor made
/// from host data (in the order they were made, with their bytes) that it uploaded: paired in
/// order, by equal size, so that a copy the window saw no tensor for (the backend's own, one
/// made before the window) is skipped over.
pub(crate) fn pair_uploads(copies: &[u64], made: &[u64]) -> Vec<Option<usize>> {
    let mut next = 0;
    copies
        .iter()
        .map(|bytes| {
            let end = (next + LOOKAHEAD).min(made.len());
            let found = (next..end).find(|&j| made[j] == *bytes);
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
    fn copies_pair_with_the_tensors_made_in_order_by_size() {
        // The batch (two tensors), a planted constant, then a copy nothing explains.
        let made = [65536, 1024, 4000];
        assert_eq!(pair_uploads(&[65536, 1024, 4000, 8], &made), [Some(0), Some(1), Some(2), None]);
        // A copy of the backend's own between them is skipped over, not paired with a neighbour.
        assert_eq!(pair_uploads(&[65536, 12, 1024, 4000], &made), [Some(0), None, Some(1), Some(2)]);
        // A tensor whose copy is missing (made before the window): the later ones still pair.
        assert_eq!(pair_uploads(&[1024, 4000], &made), [Some(1), Some(2)]);
        // The same size twice pairs in order.
        assert_eq!(pair_uploads(&[4, 4, 4], &[4, 4]), [Some(0), Some(1), None]);
    }

    #[test]
    fn names_agree_by_their_base() {
        assert_eq!(base_name("cubecl_reduce::shared::reduce_kernel<f32, 4>"), "reduce_kernel");
        assert_eq!(base_name("cubecl_reduce::shared::ReduceKernel<f32, 4>"), "reduce_kernel");
        assert_eq!(base_name("burn_cubecl::kernel::DirectConv2dKernel<R>"), "direct_conv2d_kernel");
        assert!(agrees("reduce_kernel_in_f32_in_size_4_24f41dc6", "a::reduce_kernel<f32>"));
        assert!(agrees("matmul_entry_lhs_f32_5c163ddd", "cubecl_matmul::MatmulEntry<(A, B)>"));
        assert!(agrees("elemwise_fuse_92092e62", "burn_cubecl_fusion::ElemwiseFuse"));
        assert!(!agrees("reduce_kernel_in_f32", "a::CopyKernel<f32>"));
        assert!(!agrees("matmulx_1", "a::Matmul"), "a prefix must end at an underscore");
    }

    #[test]
    fn launches_pair_in_order_and_skip_what_one_side_lacks() {
        let observed =
            ["k::CopyKernel", "k::MatmulEntry<f32>", "k::ElemwiseFuse", "k::ReduceKernel<f32>", "k::ElemwiseFuse"];
        // The first observed launch happened before CUPTI's window; CUPTI saw a kernel the
        // observer did not.
        let cupti = [
            "matmul_entry_lhs_f32_5c163ddd",
            "other_kernel_1",
            "elemwise_fuse_92092e62",
            "reduce_kernel_in_f32_4fa17179",
            "elemwise_fuse_500368f3",
        ];
        assert_eq!(align(&cupti, &observed), vec![Some(1), None, Some(2), Some(3), Some(4)]);
        assert_eq!(align(&cupti, &[]), vec![None; 5]);
    }
}
