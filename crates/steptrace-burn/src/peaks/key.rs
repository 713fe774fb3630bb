//! Which peaks a cache file holds: the backend, the device and the software they were
//! measured with.

use steptrace::format::peaks::{Peaks, PEAKS_VERSION};

use crate::backend::{BackendKind, Selection};

/// The burn release this steptrace is built and tested against (the workspace's
/// `Cargo.lock`; a unit test keeps the two equal).
pub const BURN_RELEASE: &str = "0.22.1";
/// The cubecl release (pinned exactly in steptrace-burn's `Cargo.toml`).
pub const CUBECL_RELEASE: &str = "0.11.3";
/// The wgpu release (pinned exactly in steptrace-burn's `Cargo.toml`).
pub const WGPU_RELEASE: &str = "30.0.2";

/// What a set of peaks belongs to: a cache file holds the peaks of one key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeaksKey {
    /// The backend (`cuda`, `wgpu`, `cpu`).
    pub backend: BackendKind,
    /// The device as the backend selection names it (`NVIDIA H200`,
    /// `llvmpipe (LLVM 15.0.6, 256 bits) [Vulkan, Cpu]`, `AMD EPYC (2 threads, burn-flex)`).
    pub device: String,
    /// The software the figures hold for ([`software`]).
    pub software: String,
    /// Whether the device is a CPU (the CPU backend, or wgpu on a CPU adapter).
    pub cpu: bool,
}

impl PeaksKey {
    /// The key of a backend selection.
    pub fn of(selection: &Selection) -> PeaksKey {
        PeaksKey {
            backend: selection.kind,
            device: selection.device.clone(),
            software: software(selection.kind),
            cpu: !selection.is_gpu(),
        }
    }

    /// The cache file's name: the backend, the device and the software, each reduced to
    /// letters, digits and dashes (`cpu_amd-epyc-2-threads-burn-flex_burn-0-22-1.json`).
    pub fn file_name(&self) -> String {
        format!("{}_{}_{}.json", self.backend, slug(&self.device), slug(&self.software))
    }

    /// Why `peaks` (read from this key's file) are not this key's, or `None` when they are.
    pub fn mismatch(&self, peaks: &Peaks) -> Option<String> {
        if peaks.version != PEAKS_VERSION {
            return Some(format!(
                "written in layout version {} of peaks files; this steptrace reads version {PEAKS_VERSION}",
                peaks.version
            ));
        }
        if peaks.backend != self.backend.as_str() {
            return Some(format!("holds the {} backend's peaks, not {}'s", peaks.backend, self.backend));
        }
        if peaks.device != self.device {
            return Some(format!("holds the peaks of {:?}, not of {:?}", peaks.device, self.device));
        }
        if peaks.software != self.software {
            return Some(format!("measured with {}; this is {}", peaks.software, self.software));
        }
        None
    }
}

/// The software a backend's figures hold for: burn and cubecl, with wgpu's release on wgpu
/// and the NVIDIA driver's version on CUDA where the kernel module says it.
pub fn software(kind: BackendKind) -> String {
    let own = concat!("steptrace-burn ", env!("CARGO_PKG_VERSION"));
    match kind {
        BackendKind::Cpu => format!("burn {BURN_RELEASE} (burn-flex), {own}"),
        BackendKind::Wgpu => format!("burn {BURN_RELEASE}, cubecl {CUBECL_RELEASE}, wgpu {WGPU_RELEASE}, {own}"),
        BackendKind::Cuda => match nvidia_driver() {
            Some(driver) => format!("burn {BURN_RELEASE}, cubecl {CUBECL_RELEASE}, NVIDIA driver {driver}, {own}"),
            None => format!("burn {BURN_RELEASE}, cubecl {CUBECL_RELEASE}, {own}"),
        },
    }
}

/// The NVIDIA kernel module's version (`550.54.15`), from `/sys/module/nvidia/version`, else
/// `/proc/driver/nvidia/version`; `None` where neither says it.
fn nvidia_driver() -> Option<String> {
    let clean = |v: &str| {
        let v = v.trim();
        (!v.is_empty() && v.len() < 32 && v.chars().all(|c| c.is_ascii_alphanumeric() || c == '.'))
            .then(|| v.to_owned())
    };
    if let Some(v) = read_small("/sys/module/nvidia/version").as_deref().and_then(clean) {
        return Some(v);
    }
    // "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 ..."
    let text = read_small("/proc/driver/nvidia/version")?;
    let line = text.lines().next()?;
    let after = line.split("Kernel Module").nth(1)?;
    after.split_whitespace().next().and_then(clean)
}

/// A small system file's text (at most 4 KiB read).
fn read_small(path: &str) -> Option<String> {
    use std::io::Read;
    let mut text = String::new();
    std::fs::File::open(path).ok()?.take(4096).read_to_string(&mut text).ok()?;
    Some(text)
}

/// `text` in lower case, every run of other characters than letters and digits one dash,
/// at most 80 characters.
fn slug(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    let mut out: String = out.trim_end_matches('-').chars().take(80).collect();
    if out.is_empty() {
        out.push_str("unnamed");
    }
    out.trim_end_matches('-').to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(device: &str) -> PeaksKey {
        PeaksKey { backend: BackendKind::Wgpu, device: device.into(), software: software(BackendKind::Wgpu), cpu: true }
    }

    #[test]
    fn file_names_are_plain() {
        let k = key("llvmpipe (LLVM 15.0.6, 256 bits) [Vulkan, Cpu]");
        let name = k.file_name();
        assert!(
            name.starts_with("wgpu_llvmpipe-llvm-15-0-6-256-bits-vulkan-cpu_burn-0-22-1-cubecl-0-11-3-wgpu-30-0-2"),
            "{name}"
        );
        assert!(
            name.ends_with(".json") && name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)),
            "{name}"
        );
        assert_eq!(slug("../../etc/passwd"), "etc-passwd");
        assert_eq!(slug("///"), "unnamed");
        assert!(slug(&"x".repeat(500)).len() <= 80);
    }

    /// The releases named in the cache's key are the ones this workspace locks.
    #[test]
    fn releases_match_the_lock_file() {
        let lock = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.lock");
        let Ok(lock) = std::fs::read_to_string(lock) else { return };
        for (name, release) in [("burn", BURN_RELEASE), ("cubecl", CUBECL_RELEASE), ("wgpu", WGPU_RELEASE)] {
            let entry = format!("name = \"{name}\"\nversion = \"{release}\"\n");
            assert!(lock.contains(&entry), "Cargo.lock does not lock {name} {release}: update peaks/key.rs");
        }
    }

    #[test]
    fn a_file_of_another_version_or_device_is_named_as_such() {
        let k = key("dev");
        let mut p = Peaks {
            version: PEAKS_VERSION,
            device: "dev".into(),
            backend: "wgpu".into(),
            software: k.software.clone(),
            measured_at: String::new(),
            read: None,
            write: None,
            copy: None,
            flops: Default::default(),
            launch_us: None,
            published: Default::default(),
            problems: vec![],
            cpu: true,
        };
        assert_eq!(k.mismatch(&p), None);
        p.software = "burn 0.21.0".into();
        assert!(k.mismatch(&p).is_some_and(|m| m.starts_with("measured with burn 0.21.0; this is burn 0.22.1")));
        p.version = PEAKS_VERSION + 1;
        assert!(k.mismatch(&p).is_some_and(|m| m.contains("layout version")));
        p.version = PEAKS_VERSION;
        p.software = k.software.clone();
        p.device = "other".into();
        assert!(k.mismatch(&p).is_some_and(|m| m.contains("\"other\"")));
    }
}
