//! Borrowing a tensor's f32 (or f16) values where they lie, to hand them to
//! Cake's kernels without a copy.

use candle_core::{CpuStorage, Storage, Tensor};
use half::f16;

/// Calls `f` with the values of `tensor` when it is a contiguous f32 tensor
/// on the CPU; otherwise returns `None`.
pub fn with_cpu_f32<R>(tensor: &Tensor, f: impl FnOnce(&[f32]) -> R) -> Option<R> {
    if !tensor.is_contiguous() {
        return None;
    }
    let (storage, layout) = tensor.storage_and_layout();
    let Storage::Cpu(CpuStorage::F32(values)) = &*storage else {
        return None;
    };
    let start = layout.start_offset();
    Some(f(&values[start..start + tensor.elem_count()]))
}

/// As [`with_cpu_f32`], for a contiguous f16 tensor on the CPU.
pub fn with_cpu_f16<R>(tensor: &Tensor, f: impl FnOnce(&[f16]) -> R) -> Option<R> {
    if !tensor.is_contiguous() {
        return None;
    }
    let (storage, layout) = tensor.storage_and_layout();
    let Storage::Cpu(CpuStorage::F16(values)) = &*storage else {
        return None;
    };
    let start = layout.start_offset();
    Some(f(&values[start..start + tensor.elem_count()]))
}
