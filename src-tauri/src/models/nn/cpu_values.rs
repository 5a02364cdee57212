//! Borrowing a tensor's values where they lie, to hand them to Cake's
//! kernels without a copy.

use candle_core::{Layout, Storage, Tensor, WithDType};

/// Calls `f` with the values of `tensor` when it is a contiguous tensor of
/// `T` on the CPU; otherwise returns `None`.
pub fn with_cpu_values<T: WithDType, R>(tensor: &Tensor, f: impl FnOnce(&[T]) -> R) -> Option<R> {
    let (storage, layout) = tensor.storage_and_layout();
    Some(f(cpu_slice(tensor, &storage, layout)?))
}

/// [`with_cpu_values`] for several tensors at once: `f` gets their values
/// in order, or `None` is returned if any is not contiguous `T` on the CPU.
pub fn with_all_cpu_values<T: WithDType, R>(tensors: &[&Tensor], f: impl FnOnce(&[&[T]]) -> R) -> Option<R> {
    let held: Vec<_> = tensors.iter().map(|tensor| tensor.storage_and_layout()).collect();
    let slices = (tensors.iter().zip(&held))
        .map(|(tensor, (storage, layout))| cpu_slice(tensor, storage, layout))
        .collect::<Option<Vec<&[T]>>>()?;
    Some(f(&slices))
}

/// The values of `tensor` in its (held) storage, if contiguous `T` on the CPU.
fn cpu_slice<'a, T: WithDType>(tensor: &Tensor, storage: &'a Storage, layout: &Layout) -> Option<&'a [T]> {
    if !tensor.is_contiguous() {
        return None;
    }
    let Storage::Cpu(cpu) = storage else {
        return None;
    };
    let values = T::cpu_storage_as_slice(cpu).ok()?;
    let start = layout.start_offset();
    values.get(start..start + tensor.elem_count())
}
