//! Opening the selected backend's device: [`Selection::device`].
//!
//! burn 0.21 needed a job generic over the backend type, monomorphised once per backend
//! (`run_on` and its `BackendRun` trait). burn 0.22's tensors carry no backend type: the
//! device chooses at run time, so opening a device is all that is left.

use burn::prelude::Device;

#[cfg(any(feature = "cuda", feature = "wgpu", feature = "cpu"))]
use super::{probe::note_usable, BackendKind};
use super::{BackendError, Selection};

impl Selection {
    /// The selected backend's device, plain (not autodiff: call `.autodiff()` to train):
    ///
    /// * [`BackendKind::Cuda`] → `Device::cuda(0)`;
    /// * [`BackendKind::Wgpu`] → the probed adapter ([`Selection::wgpu_device`];
    ///   `DeviceKind::DefaultDevice` if it is `None`);
    /// * [`BackendKind::Cpu`] → `Device::flex()`.
    ///
    /// On CUDA and wgpu the device client is created now (as burn would at the first tensor),
    /// timed for a live [`StartupCapture`](super::StartupCapture).
    ///
    /// Call [`configure_cubecl_cache`](super::configure_cubecl_cache) before this if the
    /// persistent cubecl caches are wanted. A selection that did not come from
    /// [`select`](super::select) may name a backend that cannot run here; the backend then
    /// panics at its first operation, as burn does. A backend that is not compiled into this
    /// build is [`BackendError::NotCompiled`].
    pub fn device(&self) -> Result<Device, BackendError> {
        match self.kind {
            #[cfg(feature = "cuda")]
            BackendKind::Cuda => {
                note_usable(BackendKind::Cuda);
                let device = Device::cuda(0);
                // The client burn would create at the model's first tensor, created (and
                // timed) now: the CUDA context, streams and memory pools.
                let _ = super::startup::timed_client(|| device.sync());
                Ok(device)
            }
            #[cfg(feature = "wgpu")]
            BackendKind::Wgpu => {
                note_usable(BackendKind::Wgpu);
                let device = self
                    .wgpu_device
                    .map_or_else(|| Device::wgpu(burn::prelude::DeviceKind::DefaultDevice), |t| t.device());
                // As for CUDA: the wgpu device and queue, created (and timed) before the model
                // (a sync creates the client and waits for nothing).
                let _ = super::startup::timed_client(|| device.sync());
                Ok(device)
            }
            #[cfg(feature = "cpu")]
            BackendKind::Cpu => {
                note_usable(BackendKind::Cpu);
                Ok(Device::flex())
            }
            // Unreachable when every backend feature is on (the default build).
            #[allow(unreachable_patterns)]
            kind => Err(BackendError::NotCompiled { kind }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::{backend_runtime_name, memory_in_use, select, BackendChoice, BackendKind};
    use burn::tensor::{Tensor, TensorData};

    /// Adds two tensors on the selection's device, reads the sum back, and reports the
    /// backend's name and memory.
    fn add(selection: &Selection) -> (Vec<f32>, String, Option<u64>) {
        let device = selection.device().expect("compiled in").autodiff();
        let a = Tensor::<1>::from_data(TensorData::from([1.0f32, 2.0, 3.0]), &device);
        let b = Tensor::<1>::from_data(TensorData::from([10.0f32, 20.0, 30.0]), &device);
        let sum = a + b;
        // Something alive on the device while memory is read.
        let live = sum.clone().mul_scalar(2.0);
        device.sync().expect("device sync");
        let mem = memory_in_use(&device);
        // After a sync, cubecl asked directly (the step-end sample's way) answers what burn's
        // fusion-draining query answers.
        assert_eq!(crate::backend::memory_usage_after_sync(&device), crate::backend::memory_usage(&device));
        // Asked through the device's queue without waiting, the answer is the same.
        if let Some(asker) = crate::backend::MemoryAsker::new(&device) {
            let pending = asker.ask().expect("the question is queued");
            assert_eq!(pending.wait(), crate::backend::memory_usage_after_sync(&device));
        }
        let values = sum.into_data().try_to_vec::<f32>().unwrap_or_default();
        let doubled = live.into_data().try_to_vec::<f32>().unwrap_or_default();
        assert_eq!(doubled, vec![22.0, 44.0, 66.0]);
        (values, backend_runtime_name(&device), mem)
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
        let (values, name, mem) = add(&s);
        assert_eq!(values, vec![11.0, 22.0, 33.0]);
        assert!(name.contains("flex"), "{name}");
        assert_eq!(mem, None, "the CPU backend's memory is not observed");
    }

    /// On lavapipe (or any adapter) the same job runs through cubecl's wgpu runtime.
    #[test]
    fn add_on_wgpu() {
        let _turn = crate::backend::DEVICE_TESTS.lock().unwrap_or_else(|e| e.into_inner());
        let s = match select(BackendChoice::Wgpu) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("no wgpu adapter here, skipping: {e}");
                return;
            }
        };
        test_cache();
        eprintln!("running on {}", s.label());
        let (values, name, mem) = add(&s);
        eprintln!("wgpu: name={name} memory_in_use={mem:?}");
        assert_eq!(values, vec![11.0, 22.0, 33.0]);
        assert!(name.contains("wgpu"), "{name}");
        assert!(mem.is_some_and(|m| m > 0), "wgpu memory should be observable: {mem:?}");

        // A question asked ahead is answered behind the tasks queued before it and ahead of
        // those queued after: 4 MiB made after asking are not in its answer, and are in the
        // next query's.
        let device = s.device().expect("compiled in").autodiff();
        let asker = crate::backend::MemoryAsker::new(&device).expect("wgpu's queue is reachable");
        let before = crate::backend::memory_usage_after_sync(&device).expect("observed").bytes_in_use;
        let pending = asker.ask().expect("the question is queued");
        let big = Tensor::<1>::from_data(TensorData::from(vec![1.0f32; 1 << 20].as_slice()), &device);
        device.sync().expect("device sync");
        let after = crate::backend::memory_usage_after_sync(&device).expect("observed").bytes_in_use;
        let asked = pending.wait().expect("answered").bytes_in_use;
        assert_eq!(asked, before, "the answer holds what the device held when it was asked");
        assert!(after >= before + (4 << 20), "the tensor made after asking is allocated: {before} -> {after}");
        drop(big);
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
        let (values, name, mem) = add(&s);
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
            let err = s.device().expect_err("not compiled in");
            assert_eq!(err, BackendError::NotCompiled { kind });
            assert!(err.to_string().contains(&format!("without its `{}` feature", kind.feature())), "{err}");
        }
    }
}
