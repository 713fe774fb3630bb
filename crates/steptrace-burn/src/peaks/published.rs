//! The published figures of the devices steptrace knows, by device name, with their source.
//!
//! Only datasheet figures are here, for the exact product a device name identifies; a name
//! that does not identify one (a PCIe or NVL card, a Grace Hopper module, any other device)
//! has no published figure, rather than a guess.

use std::collections::BTreeMap;

use steptrace::format::peaks::Published;

/// One product's datasheet line.
struct Sheet {
    product: &'static str,
    datasheet: &'static str,
    /// Memory bandwidth, TB/s (10^12 bytes/s).
    bandwidth_tb: f64,
    memory: &'static str,
    /// FP32 without tensor cores, TFLOP/s.
    f32_tflops: f64,
    /// BF16 and FP16 on tensor cores, dense, TFLOP/s.
    half_dense_tflops: f64,
    /// The datasheet's BF16 and FP16 figure, which is with sparsity, TFLOP/s.
    half_sparse_tflops: f64,
}

const H200_SXM: Sheet = Sheet {
    product: "H200 SXM",
    datasheet: "NVIDIA H200 Tensor Core GPU datasheet",
    bandwidth_tb: 4.8,
    memory: "HBM3e",
    f32_tflops: 67.0,
    half_dense_tflops: 989.0,
    half_sparse_tflops: 1979.0,
};

const H100_SXM: Sheet = Sheet {
    product: "H100 SXM",
    datasheet: "NVIDIA H100 Tensor Core GPU datasheet",
    bandwidth_tb: 3.35,
    memory: "HBM3",
    f32_tflops: 67.0,
    half_dense_tflops: 989.0,
    half_sparse_tflops: 1979.0,
};

/// The product a device name identifies: `NVIDIA H200` is the H200 SXM (the NVL card says
/// `NVL`); `NVIDIA H100 80GB HBM3` is the H100 SXM (the PCIe and NVL cards say so, and have
/// HBM2e or other figures). Names are matched word by word, so `GH200` is not an H200.
fn sheet(device: &str) -> Option<&'static Sheet> {
    let words: Vec<String> = device
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_lowercase)
        .collect();
    let has = |w: &str| words.iter().any(|x| x == w);
    if has("nvl") || has("pcie") {
        return None;
    }
    if has("h200") {
        return Some(&H200_SXM);
    }
    if has("h100") && (has("hbm3") || has("sxm") || has("sxm5")) {
        return Some(&H100_SXM);
    }
    None
}

/// The published figures of `device` (a backend selection's device name), keyed as
/// [`Peaks::published`](steptrace::format::peaks::Peaks::published) is: `bandwidth`
/// (bytes/s), `f32`, `f16`, `bf16` (FLOP/s). Empty for a device steptrace has no datasheet
/// figures for.
///
/// # Examples
///
/// ```
/// let h200 = steptrace_burn::peaks::published("NVIDIA H200");
/// assert_eq!(h200["bandwidth"].value, 4.8e12);
/// assert!(h200["bf16"].source.contains("sparsity"));
/// assert!(steptrace_burn::peaks::published("NVIDIA H100 PCIe").is_empty());
/// ```
pub fn published(device: &str) -> BTreeMap<String, Published> {
    let mut out = BTreeMap::new();
    let Some(s) = sheet(device) else { return out };
    let line = |what: String| format!("{}: {}, {what}", s.datasheet, s.product);
    out.insert(
        "bandwidth".to_owned(),
        Published {
            value: s.bandwidth_tb * 1e12,
            source: line(format!("GPU memory bandwidth {} TB/s ({})", s.bandwidth_tb, s.memory)),
        },
    );
    out.insert(
        "f32".to_owned(),
        Published {
            value: s.f32_tflops * 1e12,
            source: line(format!("FP32 {} TFLOPS (without tensor cores)", s.f32_tflops)),
        },
    );
    for (key, name) in [("bf16", "BF16"), ("f16", "FP16")] {
        out.insert(
            key.to_owned(),
            Published {
                value: s.half_dense_tflops * 1e12,
                source: line(format!(
                    "{name} Tensor Core {} TFLOPS dense (the datasheet's {} TFLOPS is with sparsity)",
                    thousands(s.half_dense_tflops),
                    thousands(s.half_sparse_tflops)
                )),
            },
        );
    }
    out
}

/// `1979.0` as `1,979`.
fn thousands(v: f64) -> String {
    let n = v.round() as u64;
    if n >= 1000 {
        format!("{},{:03}", n / 1000, n % 1000)
    } else {
        n.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_products_by_name() {
        let h200 = published("NVIDIA H200");
        assert_eq!(h200["bandwidth"].value, 4.8e12);
        assert_eq!(h200["f32"].value, 67e12);
        assert_eq!(h200["bf16"].value, 989e12);
        assert_eq!(h200["f16"].value, 989e12);
        assert!(
            h200["bf16"].source.starts_with("NVIDIA H200 Tensor Core GPU datasheet: H200 SXM"),
            "{}",
            h200["bf16"].source
        );
        assert!(h200["bf16"].source.contains("1,979 TFLOPS is with sparsity"), "{}", h200["bf16"].source);
        let h100 = published("NVIDIA H100 80GB HBM3");
        assert_eq!(h100["bandwidth"].value, 3.35e12);
        assert!(h100["f32"].source.starts_with("NVIDIA H100 Tensor Core GPU datasheet"));
    }

    #[test]
    fn unknown_or_ambiguous_devices_have_none() {
        for name in [
            "NVIDIA H100 PCIe",
            "NVIDIA H100 NVL",
            "NVIDIA H200 NVL",
            "NVIDIA GH200 480GB",
            "NVIDIA H100",
            "llvmpipe (LLVM 15.0.6, 256 bits) [Vulkan, Cpu]",
            "AMD EPYC (2 threads, burn-flex)",
            "",
        ] {
            assert!(published(name).is_empty(), "{name}");
        }
    }
}
