//! The cost of an empty launch: a one-element kernel launched many times, then one sync.
//!
//! On CUDA and wgpu the kernel is cubecl's, launched directly through the device's cubecl
//! client (one unit copies one f32 to another buffer), so that burn's fusion cannot merge
//! the launches into one. The CPU backend has no kernel launch: there the figure is the
//! cost of one burn op on a one-element tensor, which is what each op pays before its work.

use burn::prelude::{Device, Tensor};
use steptrace::format::peaks::Measured;

use super::measure::{count, runs_text, timed, Runs};
use super::Plan;
use crate::backend::BackendKind;

#[cfg(any(feature = "cuda", feature = "wgpu"))]
mod kernel {
    use cubecl::prelude::*;

    /// One unit copies one element: the least work a launch can carry.
    #[cube(launch)]
    pub(super) fn one_element(input: &Tensor<f32>, output: &mut Tensor<f32>) {
        if ABSOLUTE_POS == 0 {
            output[0] = input[0];
        }
    }
}

/// The launch figure on `device` (µs per launch).
pub(super) fn launch(device: &Device, kind: BackendKind, plan: &Plan) -> Result<Measured, String> {
    match kind {
        BackendKind::Cpu => cpu_op(device, plan),
        _ => cube_launch(device, plan),
    }
}

/// One-element ops on the CPU backend: `launches` negations of a one-element tensor.
fn cpu_op(device: &Device, plan: &Plan) -> Result<Measured, String> {
    let mut runs = Runs::new(plan.warmup);
    let mut x = Tensor::<1>::ones([1], device);
    for _ in 0..plan.warmup + plan.repeats {
        let launches = plan.launches;
        let (took, y) = timed(device, move || {
            let mut x = x;
            for _ in 0..launches {
                x = x.neg();
            }
            x
        })?;
        runs.push(took);
        x = y;
    }
    drop(x);
    let method = format!(
        "{} burn `neg` ops on a one-element tensor, then one sync (burn-flex launches no kernel: this is one op's cost before its work): per op = the run's time / {}; {}",
        count(plan.launches as u64),
        count(plan.launches as u64),
        runs_text(plan.warmup, plan.repeats)
    );
    runs.per_item_us(plan.launches, method)
}

#[cfg(any(feature = "cuda", feature = "wgpu"))]
fn cube_launch(device: &Device, plan: &Plan) -> Result<Measured, String> {
    use std::time::Instant;

    use burn::backend::DispatchDevice;
    use cubecl::prelude::*;
    use cubecl::std::tensor::TensorHandle;

    use super::measure::sync;

    let plain = device.clone().without_autodiff();
    let DispatchDevice::Cube(cube) = plain.as_dispatch() else {
        return Err("the device is not a cubecl device".to_owned());
    };
    let client = cube.client();
    let storage = ElemType::Float(cubecl::ir::FloatKind::F32);
    let input = TensorHandle::zeros(&client, [1], storage);
    let output = TensorHandle::empty(&client, [1], storage);
    let wait = |client: &cubecl::client::Client| {
        cubecl::future::block_on(client.sync()).map_err(|e| format!("device sync failed: {e}"))
    };
    sync(device)?;
    let mut runs = Runs::new(plan.warmup);
    for _ in 0..plan.warmup + plan.repeats {
        wait(&client)?;
        let start = Instant::now();
        for _ in 0..plan.launches {
            kernel::one_element::launch(
                &client,
                CubeCount::Static(1, 1, 1),
                CubeDim::new_1d(1),
                input.clone().into_arg(),
                output.clone().into_arg(),
            );
        }
        wait(&client)?;
        runs.push(start.elapsed());
    }
    let method = format!(
        "{} launches of a one-element cubecl kernel (one unit copies one f32), then one device sync: per launch = the run's time / {}; {}",
        count(plan.launches as u64),
        count(plan.launches as u64),
        runs_text(plan.warmup, plan.repeats)
    );
    runs.per_item_us(plan.launches, method)
}

#[cfg(not(any(feature = "cuda", feature = "wgpu")))]
fn cube_launch(_device: &Device, _plan: &Plan) -> Result<Measured, String> {
    Err("steptrace-burn was built without its `cuda` and `wgpu` features: no cubecl kernel to launch".to_owned())
}
