//! [`Upload`]: what a host-to-device copy moves, measured before the copy.

use burn::prelude::{Device, TensorData};
use burn::tensor::DType;

use crate::data::HostBatch;

/// What one copy to the device moves: the bytes of its input and target, the samples, and
/// the input's shape.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct UploadSize {
    /// Bytes of the input once on the device.
    pub input_bytes: u64,
    /// Bytes of the target once on the device (0 for a copy of one part only).
    pub target_bytes: u64,
    /// Samples: the input's first dimension.
    pub samples: Option<usize>,
    /// The input's shape.
    pub input_shape: Vec<usize>,
}

/// Host data that [`Session::copy`](crate::Session::copy) copies to the device: a burn
/// `TensorData`, a pair `(input, target)` of them, a [`HostBatch`], or references to these.
/// Its size is read before the copy, for the `transfer.h2d` span (`input_bytes`,
/// `target_bytes`), which is how a report tells the batch's copies from other uploads.
pub trait Upload {
    /// Its size on `device` (burn stores host `i64` as the device's integer width, `i32` on
    /// cubecl: the device's figure, not the host's).
    fn upload_size(&self, device: &Device) -> UploadSize;
}

/// The bytes `data` takes once on `device`: its elements at the device's own float or int
/// width.
fn device_bytes(data: &TensorData, device: &Device) -> u64 {
    let elems = data.num_elements() as u64;
    let settings = device.settings();
    let width = if data.dtype().is_float() {
        DType::from(settings.float_dtype).size()
    } else if data.dtype().is_int() || data.dtype().is_uint() {
        DType::from(settings.int_dtype).size()
    } else {
        data.dtype().size()
    };
    elems.saturating_mul(width as u64)
}

impl Upload for TensorData {
    fn upload_size(&self, device: &Device) -> UploadSize {
        let shape = self.shape().to_vec();
        UploadSize {
            input_bytes: device_bytes(self, device),
            target_bytes: 0,
            samples: shape.first().copied(),
            input_shape: shape,
        }
    }
}

impl<A: Upload, B: Upload> Upload for (A, B) {
    fn upload_size(&self, device: &Device) -> UploadSize {
        let (input, target) = (self.0.upload_size(device), self.1.upload_size(device));
        UploadSize {
            input_bytes: input.input_bytes.saturating_add(input.target_bytes),
            target_bytes: target.input_bytes.saturating_add(target.target_bytes),
            samples: input.samples,
            input_shape: input.input_shape,
        }
    }
}

impl Upload for HostBatch {
    fn upload_size(&self, device: &Device) -> UploadSize {
        let mut size = (&self.input, &self.target).upload_size(device);
        size.samples = Some(self.samples);
        size
    }
}

impl<T: Upload + ?Sized> Upload for &T {
    fn upload_size(&self, device: &Device) -> UploadSize {
        (**self).upload_size(device)
    }
}

impl<T: Upload> Upload for Vec<T> {
    /// Every element's bytes as input; the samples and shape of the first.
    fn upload_size(&self, device: &Device) -> UploadSize {
        let mut out = self.first().map(|t| t.upload_size(device)).unwrap_or_default();
        out.input_bytes = self
            .iter()
            .map(|t| {
                let s = t.upload_size(device);
                s.input_bytes + s.target_bytes
            })
            .sum();
        out.target_bytes = 0;
        out
    }
}

#[cfg(all(test, feature = "cpu"))]
mod tests {
    use super::*;

    #[test]
    fn a_pair_is_input_and_target_at_the_device_width() {
        let device = Device::flex();
        let x = TensorData::new(vec![0.5f32; 3 * 5], [3, 5]);
        let y = TensorData::new(vec![1i64; 3], [3]);
        let size = (&x, &y).upload_size(&device);
        // burn-flex stores integers as i32: 4 bytes each, half of the host's i64.
        assert_eq!((size.input_bytes, size.target_bytes, size.samples), (60, 12, Some(3)));
        assert_eq!(size.input_shape, vec![3, 5]);
        assert_eq!(x.upload_size(&device).target_bytes, 0);
        assert_eq!(vec![x.clone(), x].upload_size(&device).input_bytes, 120);
    }
}
