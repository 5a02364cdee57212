//! Borrowing a tensor's values where they lie, to hand them to Cake's
//! kernels without a copy.

use candle_core::{Storage, Tensor, WithDType};

/// Calls `f` with the values of `tensor` when it is a contiguous tensor of
/// `T` on the CPU; otherwise returns `None`.
pub fn with_cpu_values<T: WithDType, R>(tensor: &Tensor, f: impl FnOnce(&[T]) -> R) -> Option<R> {
    if !tensor.is_contiguous() {
        return None;
    }
    let (storage, layout) = tensor.storage_and_layout();
    let Storage::Cpu(cpu) = &*storage else {
        return None;
    };
    let values = T::cpu_storage_as_slice(cpu).ok()?;
    let start = layout.start_offset();
    Some(f(&values[start..start + tensor.elem_count()]))
}
