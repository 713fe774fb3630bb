//! Tests of kernel records and their comparison: hand-made tables whose
//! answers are worked out in the comments.

use super::*;
use crate::read::bench::KernelComparison;

fn row(name: &str, calls: f64, ms: f64) -> KernelSummaryRow {
    KernelSummaryRow {
        name: name.into(),
        label: name.into(),
        calls_per_step: calls,
        ms_per_step: ms,
        mean_us: ms * 1000.0 / calls,
        grid: None,
        block: None,
        share_of_busy: 0.0,
    }
}

fn summary(rows: Vec<KernelSummaryRow>, busy: f64) -> KernelSummary {
    let kernel: f64 = rows.iter().map(|r| r.ms_per_step).sum();
    let kernels = rows.iter().map(|r| r.calls_per_step).sum();
    KernelSummary {
        steps: 3,
        kernels_per_step: kernels,
        busy_ms_per_step: busy,
        kernel_ms_per_step: kernel,
        rows,
        others_ms_per_step: 0.0,
        others: 0,
    }
}

#[test]
fn kernels_are_ranked_by_absolute_change_and_matched_by_exact_name() {
    let a = summary(
        vec![row("gemm_a", 2.0, 1.0), row("fuse_b", 4.0, 0.5), row("reduce_c", 1.0, 0.25), row("gone", 1.0, 0.1)],
        2.0,
    );
    // gemm_a −0.5, fuse_b +0.75, reduce_c 0, gone −0.1, Fuse_b (another
    // name: case counts) +0.2.
    let b = summary(
        vec![row("gemm_a", 2.0, 0.5), row("fuse_b", 8.0, 1.25), row("reduce_c", 1.0, 0.25), row("Fuse_b", 1.0, 0.2)],
        2.5,
    );
    let c = KernelComparison::new(&a, &b);
    let order: Vec<(&str, f64)> = c.rows.iter().map(|r| (r.name.as_str(), r.change_ms_per_step)).collect();
    assert_eq!(order, [("fuse_b", 0.75), ("gemm_a", -0.5), ("Fuse_b", 0.2), ("gone", -0.1), ("reduce_c", 0.0)]);
    let fuse = &c.rows[0];
    assert_eq!((fuse.a_calls_per_step, fuse.b_calls_per_step), (Some(4.0), Some(8.0)));
    assert_eq!((c.rows[3].a_ms_per_step, c.rows[3].b_ms_per_step), (Some(0.1), None));
    assert_eq!((c.names.common, c.names.only_a, c.names.only_b), (3, 1, 1));
    // A: 1.75 of 1.85 ms shared; B: 2.0 of 2.2 ms.
    assert!((c.names.common_share_a - 1.75 / 1.85).abs() < 1e-12);
    assert!((c.names.common_share_b - 2.0 / 2.2).abs() < 1e-12);
    assert!(c.names.matched);
    assert_eq!(c.busy_change_ms_per_step, 0.5);
}

#[test]
fn a_side_against_itself_changes_nothing() {
    let a = summary(vec![row("gemm_a", 2.0, 1.0 / 3.0), row("fuse_b", 4.0, 0.1)], 2.0);
    let c = KernelComparison::new(&a, &a);
    assert!(c.rows.iter().all(|r| r.change_ms_per_step == 0.0));
    assert!(c.classes.iter().all(|r| r.change_ms_per_step == 0.0));
    assert!(c.names.matched && c.names.common_share_a == 1.0);
    assert_eq!(c.busy_change_ms_per_step, 0.0);
}

#[test]
fn foreign_names_do_not_match_and_classes_still_compare() {
    let burn = summary(
        vec![
            row("matmul_entry_lhs_f32_lhs_size_4", 5.0, 0.02),
            row("elemwise_fuse", 11.0, 0.016),
            row("reduce_kernel_fused_in_f32", 2.0, 0.004),
            row("full_kernel_c_f32_n_2", 2.0, 0.001),
            row("gather_kernel_t_f32_i_i32", 1.0, 0.001),
        ],
        0.094,
    );
    let torch = summary(
        vec![
            row("sm80_xmma_gemm_f32f32_nt_n_tilesize32x128x8_cublas", 1.0, 0.05),
            row("void cublasLt::splitKreduce_kernel<32, 16, int, float>(cublasLt::cublasSplitKParams<float>)", 3.0, 0.0045),
            row("void at::native::reduce_kernel<128, 4, at::native::ReduceOp<float> >(at::native::ReduceOp<float>)", 2.0, 0.011),
            row("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::TensorListMetadata<2> >(int)", 1.0, 0.0055),
            row("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float> >(int)", 2.0, 0.0015),
        ],
        0.17,
    );
    let c = KernelComparison::new(&burn, &torch);
    // No name in common: 0% of either side's time can be paired.
    assert!(!c.names.matched);
    assert_eq!((c.names.common, c.names.common_share_a, c.names.common_share_b), (0, 0.0, 0.0));
    assert!(c.names.common_share_a.is_sign_positive(), "no common time is 0, not −0");
    let class = |k: KernelClass| c.classes.iter().find(|x| x.class == k).unwrap();
    let m = class(KernelClass::Matmul);
    assert_eq!((m.a_ms_per_step, m.b_ms_per_step, m.a_names, m.b_names), (0.02, 0.05 + 0.0045, 1, 2));
    assert_eq!((m.a_calls_per_step, m.b_calls_per_step), (5.0, 4.0));
    assert_eq!(class(KernelClass::Elementwise).b_ms_per_step, 0.0055);
    assert_eq!(class(KernelClass::Reduction).a_ms_per_step, 0.004);
    assert_eq!(class(KernelClass::CopyFill).a_ms_per_step, 0.001);
    assert_eq!(class(KernelClass::Other).b_names, 0);
    // Per class, B − A: matmul 0.0545 − 0.02 = +0.0345, elementwise
    // 0.0055 − 0.016 = −0.0105, reduction 0.011 − 0.004 = +0.007, copy/fill
    // 0.0015 − 0.001 = +0.0005, other 0 − 0.001 = −0.001: matmul first.
    assert_eq!(c.classes[0].class, KernelClass::Matmul);
    assert!((c.classes[0].change_ms_per_step - 0.0345).abs() < 1e-12);
    assert!(c.classes.iter().all(|x| x.class != KernelClass::Convolution), "absent on both sides: not listed");
}

#[test]
fn classes_follow_the_documented_rules() {
    use KernelClass::*;
    let cases = [
        ("matmul_entry_lhs_f32_lhs_size_4_rhs_f32", Matmul),
        ("void sgemm_largek_lds64<true, false, 5>(float*, float const*)", Matmul),
        ("void cutlass::Kernel2<cutlass_80_simt_sgemm_64x64_8x5_nt_align1>(Params)", Matmul),
        ("void cublasLt::epilogue::impl::globalKernel<8, 32, float>(int)", Matmul),
        ("implicit_convolve_sgemm", Convolution),
        ("conv2d_im2col_kernel", Convolution),
        ("convert_f16_to_f32", Other),
        ("elemwise_fuse", Elementwise),
        ("kernel_binop_c_f32_n_1", Elementwise),
        ("reduce_kernel_fused_in_f32", Reduction),
        ("void (anonymous namespace)::softmax_warp_forward<float, 4>(float*, bool const*)", Reduction),
        ("layer_norm_kernel", Reduction),
        ("normal_kernel_f32", Other),
        ("full_kernel_c_f32_n_2", CopyFill),
        ("Memset (Device)", CopyFill),
        ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float> >(int)", CopyFill),
        ("void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float> >(int)", Elementwise),
        // A type in the parameter list says nothing of the kernel.
        ("void scal_kernel<float, float, 1>(cublasTransposeParams<float>, float const*)", Other),
        ("gather_kernel_t_f32_i_i32", Other),
    ];
    for (name, class) in cases {
        assert_eq!(KernelClass::of(name), class, "{name}");
    }
}

#[test]
fn runs_are_averaged_and_absence_keeps_its_reason() {
    let bench = |kernels: Vec<KernelRecord>| {
        let runs = (0..kernels.len().max(1)).map(|_| crate::read::bench::RunRecord {
            time_to_first_step_ms: 1.0,
            first_step_ms: 1.0,
            cache: "warm".into(),
            step_ms: vec![1.0],
            median_ms: 1.0,
            first_loss: None,
            final_loss: None,
            held_out: None,
        });
        BenchResult::new(Default::default(), "cuda".into(), 1, 1, 8, runs.collect()).unwrap().with_kernels(kernels)
    };
    let s1 = summary(vec![row("k", 2.0, 1.0), row("only1", 1.0, 0.5)], 2.0);
    let s2 = summary(vec![row("k", 2.0, 2.0)], 4.0);
    // Means of two runs: busy (2 + 4) / 2 = 3, kernel time (1.5 + 2) / 2 =
    // 1.75; k (1 + 2) / 2 = 1.5 ms in 2 calls = 750 µs each, share 1.5 / 3;
    // only1 (0.5 + 0) / 2 = 0.25 ms in 0.5 calls = 500 µs; steps 3 + 3.
    let (side, notes) = KernelRecord::of_bench(&bench(vec![KernelRecord::Observed(s1), KernelRecord::Observed(s2)]));
    let s = side.summary().unwrap();
    assert!(notes.is_empty());
    assert_eq!((s.steps, s.busy_ms_per_step, s.kernel_ms_per_step), (6, 3.0, 1.75));
    let names: Vec<(&str, f64, f64, f64)> =
        s.rows.iter().map(|r| (r.name.as_str(), r.ms_per_step, r.calls_per_step, r.mean_us)).collect();
    assert_eq!(names, [("k", 1.5, 2.0, 750.0), ("only1", 0.25, 0.5, 500.0)]);
    assert_eq!(s.rows[0].share_of_busy, 0.5);

    let why = KernelRecord::NotObserved { reason: "device activity not observed: wgpu".into() };
    let (side, _) = KernelRecord::of_bench(&bench(vec![why.clone(), why.clone()]));
    assert_eq!(side, why);
    // An older result, or one benched without --profile active.
    let (side, _) = KernelRecord::of_bench(&bench(vec![]));
    assert!(matches!(side, KernelRecord::NotObserved { ref reason } if reason.contains("--profile active")));
    let one = KernelRecord::Observed(summary(vec![row("k", 1.0, 1.0)], 1.0));
    let (side, notes) = KernelRecord::of_bench(&bench(vec![why, one]));
    assert!(side.summary().is_some() && notes[0].contains("1 of 2 runs"), "{notes:?}");
}

#[test]
fn a_record_round_trips_with_its_status() {
    let r = KernelRecord::Observed(summary(vec![row("k", 1.0, 0.5)], 1.0));
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["status"], "observed");
    assert_eq!(serde_json::from_value::<KernelRecord>(json).unwrap(), r);
    let n = KernelRecord::NotObserved { reason: "why".into() };
    assert_eq!(serde_json::to_value(&n).unwrap(), serde_json::json!({"status": "not_observed", "reason": "why"}));
}
