//! A device collector that makes CUPTI-shaped records without a GPU, so
//! that the trace writer's device path is tested where there is none.
//!
//! Over each window it lays out, on one stream of one device, a kernel
//! every `period`, each launched from a host thread `launch_lead` before
//! it starts, plus one host-to-device copy per `copy_every` kernels; one
//! record in `orphan_every` has no launch.

use std::sync::Arc;
use std::time::{Duration, Instant};

use steptrace::device::{CopyRecord, DeviceError, KernelRecord, LaunchRecord};
use steptrace::device::{DeviceCollector, DeviceWindow};
use steptrace::format::device::{DeviceProperties, KernelArgs, MemcpyArgs};

/// See the [module docs](self).
#[derive(Debug, Clone)]
pub struct FakeGpu {
    /// Time between kernel starts.
    pub period: Duration,
    /// Each kernel's duration.
    pub kernel: Duration,
    /// How long before its kernel a launch starts.
    pub launch_lead: Duration,
    /// A copy after every this many kernels (0: none).
    pub copy_every: u64,
    /// Every this many kernels, one has no launch record (0: none).
    pub orphan_every: u64,
    /// The stream.
    pub stream: u64,
    /// The device ordinal (a rank's device in a run of several).
    pub device: u32,
    opened: Option<Instant>,
    next_correlation: u64,
}

impl Default for FakeGpu {
    fn default() -> Self {
        FakeGpu {
            period: Duration::from_micros(50),
            kernel: Duration::from_micros(20),
            launch_lead: Duration::from_micros(8),
            copy_every: 4,
            orphan_every: 0,
            stream: 7,
            device: 0,
            opened: None,
            next_correlation: 1,
        }
    }
}

fn us(since: Duration) -> f64 {
    since.as_secs_f64() * 1e6
}

impl DeviceCollector for FakeGpu {
    fn open(&mut self) -> Result<(), DeviceError> {
        self.opened = Some(Instant::now());
        Ok(())
    }

    fn close(&mut self, origin: Instant) -> Result<DeviceWindow, DeviceError> {
        let opened = self.opened.take().ok_or("closed without being opened")?;
        let closed = Instant::now();
        let mut window = DeviceWindow::default();
        window.source = "fake GPU (tests)".into();
        window.kinds = vec!["kernel".into(), "memcpy".into(), "launch".into()];
        let mut device = DeviceProperties::default();
        device.id = self.device;
        device.name = "Fake GPU".into();
        device.num_sms = 4;
        window.devices.push(device);
        let name: Arc<str> = Arc::from("fake_kernel_f32");
        let mut t = opened + self.launch_lead;
        let mut n = 0u64;
        while t + self.kernel < closed {
            let start = us(t.duration_since(origin));
            let correlation = self.next_correlation;
            self.next_correlation += 1;
            n += 1;
            let mut args = KernelArgs::default();
            (args.device, args.stream, args.correlation, args.grid, args.block) =
                (self.device, self.stream, correlation, Some([8, 1, 1]), Some([128, 1, 1]));
            window.kernels.push(KernelRecord {
                start_us: start,
                end_us: start + us(self.kernel),
                name: name.clone(),
                args,
            });
            if self.orphan_every == 0 || !n.is_multiple_of(self.orphan_every) {
                let launch_start = start - us(self.launch_lead);
                window.launches.push(LaunchRecord {
                    start_us: launch_start,
                    end_us: launch_start + 3.0,
                    name: "cuLaunchKernel".into(),
                    correlation,
                    cbid: Some(307),
                    thread: 1,
                    thread_name: Some("DSU-fake".into()),
                });
            }
            if self.copy_every > 0 && n.is_multiple_of(self.copy_every) {
                let mut copy = MemcpyArgs::default();
                (copy.device, copy.stream, copy.correlation, copy.bytes, copy.kind) =
                    (self.device, self.stream, correlation, 4096, "HtoD".into());
                let c0 = start + us(self.kernel) + 1.0;
                window.copies.push(CopyRecord { start_us: c0, end_us: c0 + 2.0, args: copy });
            }
            t += self.period;
        }
        Ok(window)
    }
}
