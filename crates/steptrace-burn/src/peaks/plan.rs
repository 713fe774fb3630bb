//! How much work each figure does: sizes that scale with the device.

use burn::prelude::Device;

use crate::backend::{BackendKind, Selection};

const MIB: u64 = 1 << 20;

/// The sizes and repeats of a measurement ([`measure_with`](super::measure_with)).
///
/// [`Plan::for_selection`] scales them with the device: on a GPU, buffers of 1 GiB and a
/// matmul of n = 8192, so that a run takes long enough to time and the buffers are far
/// larger than any cache; on a CPU (the CPU backend, or wgpu on a CPU adapter such as
/// lavapipe), buffers of four times the last-level cache (64 to 256 MiB) and a matmul of
/// n = 1024 (512 on a CPU adapter), so that the whole measurement takes seconds.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Plan {
    /// Bytes of each buffer the bandwidth figures move (f32 elements: a quarter as many).
    pub buffer_bytes: u64,
    /// The side of the square matmuls.
    pub matmul_n: usize,
    /// The dtypes whose matmul is measured besides `f32` (`f16`, `bf16` on CUDA).
    pub half_dtypes: Vec<&'static str>,
    /// Launches of the one-element kernel in one timed run.
    pub launches: usize,
    /// Untimed runs first (compilation, autotune, the memory pool's first allocations).
    pub warmup: usize,
    /// Timed runs of each bandwidth and launch figure; the best is kept.
    pub repeats: usize,
    /// Timed runs of each matmul.
    pub matmul_repeats: usize,
}

impl Plan {
    /// The plan for a backend selection (see [`Plan`]).
    pub fn for_selection(selection: &Selection) -> Plan {
        if selection.is_gpu() {
            Plan {
                buffer_bytes: 1024 * MIB,
                matmul_n: 8192,
                half_dtypes: if selection.kind == BackendKind::Cuda { vec!["f16", "bf16"] } else { Vec::new() },
                launches: 10_000,
                warmup: 3,
                repeats: 10,
                matmul_repeats: 5,
            }
        } else {
            let cpu_adapter = selection.kind != BackendKind::Cpu;
            Plan {
                buffer_bytes: (4 * last_level_cache().unwrap_or(16 * MIB)).clamp(64 * MIB, 256 * MIB),
                matmul_n: if cpu_adapter { 512 } else { 1024 },
                half_dtypes: Vec::new(),
                launches: if cpu_adapter { 500 } else { 2_000 },
                warmup: 2,
                repeats: 5,
                matmul_repeats: 3,
            }
        }
    }

    /// A plan small enough for a unit test (a few MiB, n = 128): its figures are not the
    /// device's limits.
    pub fn tiny() -> Plan {
        Plan {
            buffer_bytes: 4 * MIB,
            matmul_n: 128,
            half_dtypes: Vec::new(),
            launches: 50,
            warmup: 1,
            repeats: 2,
            matmul_repeats: 2,
        }
    }

    /// This plan with its buffers no larger than `device` allocates at once, and all three
    /// of a matmul's matrices within a quarter of its memory (cubecl's figures; the CPU
    /// backend states none).
    pub(crate) fn fitted(mut self, device: &Device) -> Plan {
        if let Some((page, memory)) = device_limits(device) {
            self.buffer_bytes = self.buffer_bytes.min(page).max(MIB);
            if let Some(memory) = memory {
                self.buffer_bytes = self.buffer_bytes.min(memory / 8).max(MIB);
                while self.matmul_n > 256 && 3 * 4 * (self.matmul_n as u64).pow(2) > memory / 4 {
                    self.matmul_n /= 2;
                }
            }
            while self.matmul_n > 256 && 4 * (self.matmul_n as u64).pow(2) > page {
                self.matmul_n /= 2;
            }
        }
        self
    }

    /// f32 elements in one buffer.
    pub(crate) fn elements(&self) -> usize {
        (self.buffer_bytes / 4) as usize
    }
}

/// The largest single allocation and the memory budget of a cubecl device.
fn device_limits(device: &Device) -> Option<(u64, Option<u64>)> {
    #[cfg(any(feature = "cuda", feature = "wgpu"))]
    {
        use burn::backend::DispatchDevice;
        if let DispatchDevice::Cube(cube) = device.clone().without_autodiff().as_dispatch() {
            let client = cube.client();
            let memory = &client.properties().memory;
            return Some((memory.max_page_size, memory.max_memory()));
        }
    }
    let _ = device;
    None
}

/// The size of the last-level cache of CPU 0 (Linux's sysfs), bytes.
fn last_level_cache() -> Option<u64> {
    let mut largest = None;
    for index in 0..8 {
        let path = format!("/sys/devices/system/cpu/cpu0/cache/index{index}/size");
        let Ok(text) = std::fs::read_to_string(path) else { continue };
        let text = text.trim();
        let (digits, unit) = text.split_at(text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len()));
        let Ok(n) = digits.parse::<u64>() else { continue };
        let bytes = match unit {
            "K" => n * 1024,
            "M" => n * MIB,
            "G" => n * 1024 * MIB,
            _ => n,
        };
        largest = largest.max(Some(bytes));
    }
    largest
}
