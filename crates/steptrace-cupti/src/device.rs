//! What the device is: name, memory, SM count and compute capability, read
//! through the CUDA driver for the trace's `deviceProperties`.

use cudarc::driver::result::device;
use cudarc::driver::sys::CUdevice_attribute;

use crate::CuptiError;

/// A CUDA device as the trace describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// The ordinal.
    pub ordinal: u32,
    /// The name (`NVIDIA H200`).
    pub name: String,
    /// Global memory, bytes.
    pub total_memory: u64,
    /// Streaming multiprocessors.
    pub sm_count: u32,
    /// Compute capability (major, minor).
    pub compute_capability: (u32, u32),
}

fn driver(call: &'static str) -> impl Fn(cudarc::driver::DriverError) -> CuptiError {
    move |_| CuptiError::State { call, reason: "the CUDA driver refused the call" }
}

/// Reads device `ordinal`'s properties. Call it only where the CUDA
/// driver is known to load (the backend probe found it).
///
/// # Errors
///
/// When the driver cannot be initialised or the ordinal does not exist.
pub fn device_info(ordinal: u32) -> Result<DeviceInfo, CuptiError> {
    let ordinal_c = i32::try_from(ordinal).map_err(|_| CuptiError::InvalidConfig("device ordinal out of range"))?;
    std::panic::catch_unwind(|| -> Result<DeviceInfo, CuptiError> {
        cudarc::driver::result::init().map_err(driver("cuInit"))?;
        let dev = device::get(ordinal_c).map_err(driver("cuDeviceGet"))?;
        let name = device::get_name(dev).map_err(driver("cuDeviceGetName"))?;
        // SAFETY: `dev` was returned by `cuDeviceGet` just above.
        let total = unsafe { device::total_mem(dev) }.map_err(driver("cuDeviceTotalMem"))?;
        let attribute = |a: CUdevice_attribute| {
            // SAFETY: as above, `dev` is a device handle from `cuDeviceGet`.
            unsafe { device::get_attribute(dev, a) }.map_err(driver("cuDeviceGetAttribute"))
        };
        let sms = attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
        let major = attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
        let minor = attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
        Ok(DeviceInfo {
            ordinal,
            name,
            total_memory: total as u64,
            sm_count: sms.max(0) as u32,
            compute_capability: (major.max(0) as u32, minor.max(0) as u32),
        })
    })
    .unwrap_or(Err(CuptiError::State { call: "cuDeviceGet", reason: "the CUDA driver could not be loaded" }))
}
