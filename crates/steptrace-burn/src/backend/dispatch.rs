//! Running generic code on the selected backend: [`BackendRun`] and [`run_on`].

use burn::tensor::backend::AutodiffBackend;

#[cfg(feature = "cpu")]
use super::types::CpuAutodiff;
#[cfg(feature = "cuda")]
use super::types::CudaAutodiff;
#[cfg(feature = "wgpu")]
use super::types::WgpuAutodiff;
use super::{BackendError, Selection};
#[cfg(any(feature = "cuda", feature = "wgpu", feature = "cpu"))]
use super::{probe::note_usable, BackendKind};

/// A job generic over the autodiff backend; [`run_on`] picks the backend at run time.
///
/// This is where monomorphisation happens: every implementation is compiled once for each
/// of `CudaAutodiff`, `WgpuAutodiff` and `CpuAutodiff` that this build contains.
pub trait BackendRun {
    /// What the job returns.
    type Output;

    /// Runs the job on backend `B`, on `device`; `info` is the selection being run (for the
    /// manifest and for labelling output).
    fn run<B: AutodiffBackend>(self, device: B::Device, info: &Selection) -> Self::Output;
}

/// Runs `job` on the selected backend:
///
/// * [`BackendKind::Cuda`] → `CudaAutodiff` on `CudaDevice::new(0)`;
/// * [`BackendKind::Wgpu`] → `WgpuAutodiff` on the probed adapter
///   ([`Selection::wgpu_device`]; `WgpuDevice::DefaultDevice` if it is `None`);
/// * [`BackendKind::Cpu`] → `CpuAutodiff` on `NdArrayDevice::Cpu`.
///
/// On CUDA and wgpu the device client is created before the job runs (as burn would at the
/// job's first tensor), timed for a live [`StartupCapture`](super::StartupCapture).
///
/// Call [`configure_cubecl_cache`](super::configure_cubecl_cache) before this if the
/// persistent cubecl caches are wanted. A selection that did not come from
/// [`select`](super::select) may name a backend that cannot run here; the backend then
/// panics at its first operation, as burn does. A backend that is not compiled into this
/// build is [`BackendError::NotCompiled`] (the job is not run).
pub fn run_on<R: BackendRun>(selection: &Selection, job: R) -> Result<R::Output, BackendError> {
    match selection.kind {
        #[cfg(feature = "cuda")]
        BackendKind::Cuda => {
            note_usable(BackendKind::Cuda);
            let device = burn::backend::cuda::CudaDevice::new(0);
            // The client burn would create at the model's first tensor, created (and timed)
            // now: the CUDA context, streams and memory pools.
            super::startup::timed_client(|| <cubecl::cuda::CudaRuntime as cubecl::Runtime>::client(&device));
            Ok(job.run::<CudaAutodiff>(device, selection))
        }
        #[cfg(feature = "wgpu")]
        BackendKind::Wgpu => {
            note_usable(BackendKind::Wgpu);
            let device = selection
                .wgpu_device
                .map_or(burn::backend::wgpu::WgpuDevice::DefaultDevice, |t| t.device());
            // As for CUDA: the wgpu device and queue, created (and timed) before the model.
            super::startup::timed_client(|| <cubecl::wgpu::WgpuRuntime as cubecl::Runtime>::client(&device));
            Ok(job.run::<WgpuAutodiff>(device, selection))
        }
        #[cfg(feature = "cpu")]
        BackendKind::Cpu => {
            note_usable(BackendKind::Cpu);
            Ok(job.run::<CpuAutodiff>(burn::backend::ndarray::NdArrayDevice::Cpu, selection))
        }
        // Unreachable when every backend feature is on (the default build).
        #[allow(unreachable_patterns)]
        kind => {
            drop(job);
            Err(BackendError::NotCompiled { kind })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::{backend_runtime_name, memory_in_use, select, BackendChoice, BackendKind};
    use burn::tensor::{Tensor, TensorData};

    /// Adds two tensors, reads the sum back, and reports the backend's name and memory.
    struct AddJob;

    impl BackendRun for AddJob {
        type Output = (Vec<f32>, String, Option<u64>);

        fn run<B: AutodiffBackend>(self, device: B::Device, _info: &Selection) -> Self::Output {
            let a = Tensor::<B, 1>::from_data(TensorData::from([1.0f32, 2.0, 3.0]), &device);
            let b = Tensor::<B, 1>::from_data(TensorData::from([10.0f32, 20.0, 30.0]), &device);
            let sum = a + b;
            // Something alive on the device while memory is read.
            let live = sum.clone().mul_scalar(2.0);
            crate::sync::sync::<B>(&device).expect("device sync");
            let mem = memory_in_use::<B>(&device);
            let values = sum.into_data().to_vec::<f32>().unwrap_or_default();
            let doubled = live.into_data().to_vec::<f32>().unwrap_or_default();
            assert_eq!(doubled, vec![22.0, 44.0, 66.0]);
            (values, backend_runtime_name::<B>(&device), mem)
        }
    }

    /// Keeps cubecl's caches of the test runs out of the source tree.
    fn test_cache() {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            let dir = std::env::temp_dir().join("steptrace-tests").join("cubecl");
            let state = crate::backend::configure_cubecl_cache(&crate::backend::CacheConfig::at(dir));
            eprintln!("cubecl cache: {state:?}");
        });
    }

    #[cfg(feature = "cpu")]
    #[test]
    fn add_on_cpu() {
        let s = select(BackendChoice::Cpu).expect("cpu");
        let (values, name, mem) = run_on(&s, AddJob).expect("cpu is compiled in");
        assert_eq!(values, vec![11.0, 22.0, 33.0]);
        assert!(name.contains("ndarray"), "{name}");
        assert_eq!(mem, None, "ndarray memory is not observed");
    }

    /// On lavapipe (or any adapter) the same job runs through cubecl's wgpu runtime.
    #[test]
    fn add_on_wgpu() {
        let s = match select(BackendChoice::Wgpu) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("no wgpu adapter here, skipping: {e}");
                return;
            }
        };
        test_cache();
        eprintln!("running on {}", s.label());
        let (values, name, mem) = run_on(&s, AddJob).expect("wgpu is compiled in");
        eprintln!("wgpu: name={name} memory_in_use={mem:?}");
        assert_eq!(values, vec![11.0, 22.0, 33.0]);
        assert!(name.contains("wgpu"), "{name}");
        assert!(mem.is_some_and(|m| m > 0), "wgpu memory should be observable: {mem:?}");
    }

    /// Where CUDA works (skipped elsewhere): the same job through cubecl's CUDA runtime.
    #[test]
    fn add_on_cuda() {
        let s = match select(BackendChoice::Cuda) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("no CUDA here, skipping: {e}");
                return;
            }
        };
        test_cache();
        eprintln!("running on {} ({:#?})", s.label(), s.probes);
        let (values, name, mem) = run_on(&s, AddJob).expect("CUDA is compiled in");
        eprintln!("cuda: name={name} memory_in_use={mem:?}");
        assert_eq!(values, vec![11.0, 22.0, 33.0]);
        assert!(name.contains("cuda"), "{name}");
        assert!(mem.is_some_and(|m| m > 0), "CUDA memory should be observable: {mem:?}");
        let auto = select(BackendChoice::Auto).expect("auto");
        assert_eq!(auto.kind, BackendKind::Cuda);
        assert!(!auto.is_fallback());
        assert_eq!(auto.label(), s.label());
    }

    /// A hand-made selection of a backend this build lacks is an error, not a panic.
    #[test]
    fn a_backend_not_compiled_in_is_an_error() {
        for kind in BackendKind::ALL.into_iter().filter(|k| !k.is_compiled()) {
            let s = Selection {
                kind,
                device: "none".into(),
                fallback_reason: None,
                requested: kind.into(),
                wgpu_device: None,
                probes: vec![],
            };
            let err = run_on(&s, AddJob).expect_err("not compiled in");
            assert_eq!(err, BackendError::NotCompiled { kind });
            assert!(err.to_string().contains(&format!("without its `{}` feature", kind.feature())), "{err}");
        }
    }
}
