//! Large zero-initialised buffers for repacked weights.
//!
//! A model's repacked weights are one fresh allocation per matrix, written
//! once at load and read at every token. On Linux they are mapped directly
//! and marked for transparent huge pages, where the system allows them:
//! 2 MiB pages mean 512 times fewer page faults while loading and fewer TLB
//! misses while multiplying. Elsewhere, or if mapping fails, a plain zeroed
//! allocation serves.

use std::ops::{Deref, DerefMut};

/// Types made only of numbers, for which all-zero bytes are a valid value.
///
/// # Safety
/// Implement only for such types.
pub unsafe trait Zeroed: Sized {}

/// Below this size a buffer is an ordinary allocation.
#[cfg(target_os = "linux")]
const MAPPED_FROM: usize = 4 << 20;

/// `len` zero values of `T`.
pub struct ZeroedBuffer<T: Zeroed> {
    storage: Storage<T>,
    len: usize,
}

enum Storage<T> {
    Heap(Vec<T>),
    #[cfg(target_os = "linux")]
    Mapped { ptr: *mut T, bytes: usize },
}

// SAFETY: the buffer owns its memory like a Vec does.
unsafe impl<T: Zeroed + Send> Send for ZeroedBuffer<T> {}
unsafe impl<T: Zeroed + Sync> Sync for ZeroedBuffer<T> {}

impl<T: Zeroed> ZeroedBuffer<T> {
    pub fn new(len: usize) -> Self {
        let bytes = len.checked_mul(std::mem::size_of::<T>()).expect("buffer size overflows");
        #[cfg(target_os = "linux")]
        if bytes >= MAPPED_FROM && std::mem::align_of::<T>() <= 4096 {
            // SAFETY: a fresh private anonymous mapping, zero-filled by the
            // kernel, page-aligned (so aligned for `T`), unmapped in `drop`.
            unsafe {
                let ptr = libc::mmap(
                    std::ptr::null_mut(),
                    bytes,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                );
                if ptr != libc::MAP_FAILED {
                    // Advice only: without transparent huge pages it changes nothing.
                    libc::madvise(ptr, bytes, libc::MADV_HUGEPAGE);
                    return Self { storage: Storage::Mapped { ptr: ptr as *mut T, bytes }, len };
                }
            }
        }
        let _ = bytes;
        Self { storage: Storage::Heap(heap_zeroed(len)), len }
    }
}

/// A zeroed `Vec` without writing the zeros (the allocator hands out zero pages).
fn heap_zeroed<T: Zeroed>(len: usize) -> Vec<T> {
    if len == 0 || std::mem::size_of::<T>() == 0 {
        return Vec::new();
    }
    let layout = std::alloc::Layout::array::<T>(len).expect("buffer size overflows");
    // SAFETY: non-zero size; all-zero bytes are a valid `T` (`Zeroed`); the
    // allocation has the layout `Vec<T>` frees with.
    unsafe {
        let ptr = std::alloc::alloc_zeroed(layout) as *mut T;
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        Vec::from_raw_parts(ptr, len, len)
    }
}

impl<T: Zeroed> Deref for ZeroedBuffer<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        match &self.storage {
            Storage::Heap(v) => v,
            // SAFETY: `len` initialised (zeroed) values live at `ptr`.
            #[cfg(target_os = "linux")]
            Storage::Mapped { ptr, .. } => unsafe { std::slice::from_raw_parts(*ptr, self.len) },
        }
    }
}

impl<T: Zeroed> DerefMut for ZeroedBuffer<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        match &mut self.storage {
            Storage::Heap(v) => v,
            // SAFETY: as in `deref`, and `&mut self` is exclusive.
            #[cfg(target_os = "linux")]
            Storage::Mapped { ptr, .. } => unsafe { std::slice::from_raw_parts_mut(*ptr, self.len) },
        }
    }
}

impl<T: Zeroed> Drop for ZeroedBuffer<T> {
    fn drop(&mut self) {
        #[cfg(target_os = "linux")]
        if let Storage::Mapped { ptr, bytes } = self.storage {
            // SAFETY: the mapping made in `new`, no longer borrowed.
            unsafe { libc::munmap(ptr as *mut libc::c_void, bytes) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    unsafe impl Zeroed for u64 {}

    #[test]
    fn small_and_large_buffers_start_zeroed_and_keep_what_is_written() {
        for len in [0, 1, 1000, (8 << 20) / 8 + 3] {
            let mut buffer = ZeroedBuffer::<u64>::new(len);
            assert_eq!(buffer.len(), len);
            assert!(buffer.iter().all(|&v| v == 0));
            for (i, v) in buffer.iter_mut().enumerate() {
                *v = i as u64;
            }
            assert!(buffer.iter().enumerate().all(|(i, &v)| v == i as u64));
        }
    }
}
