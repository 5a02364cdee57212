//! Zero-initialised buffers for repacked weights, on huge pages.
//!
//! A model's repacked weights are a few hundred matrices of a few hundred
//! kilobytes each, written once at load and all read at every token. In
//! ordinary 4 KiB pages they need thousands of TLB entries per token, far
//! more than a core has: a decode step then waits on page walks (huge pages
//! made one-thread decoding of the default model about 20% faster). So on
//! Linux, buffers of [`SHARED_FROM`] bytes or more are carved one after
//! another out of shared 2 MiB-aligned mappings marked for transparent huge
//! pages, where the system allows them. A dropped buffer's pages go back to
//! the system at once, and a mapping is unmapped when its last buffer goes.
//! Elsewhere, or if mapping fails, a plain zeroed allocation serves.
//!
//! A buffer may also lie in a file written earlier (Cake's tile cache),
//! mapped by [`FileMapping`]: then it takes no memory of its own.

use std::ops::{Deref, DerefMut};

/// Types made only of numbers, without padding: all-zero bytes are a valid
/// value, and so is any other bit pattern (they are read back from files).
///
/// # Safety
/// Implement only for such types.
pub unsafe trait Zeroed: Sized {}

/// Below this size a buffer is an ordinary allocation.
pub const SHARED_FROM: usize = 64 << 10;

/// `len` zero values of `T`.
pub struct ZeroedBuffer<T: Zeroed> {
    storage: Storage<T>,
    len: usize,
}

enum Storage<T> {
    Heap(Vec<T>),
    /// Inside a file mapped by [`FileMapping`].
    File {
        ptr: *mut T,
        _mapping: std::sync::Arc<FileMapping>,
    },
    #[cfg(target_os = "linux")]
    Shared {
        ptr: *mut T,
        /// Keeps the mapping the buffer lives in.
        _region: std::sync::Arc<huge_pages::Region>,
    },
}

// SAFETY: the buffer owns its memory like a Vec does (no other buffer
// overlaps it in a shared region).
unsafe impl<T: Zeroed + Send> Send for ZeroedBuffer<T> {}
unsafe impl<T: Zeroed + Sync> Sync for ZeroedBuffer<T> {}

impl<T: Zeroed> ZeroedBuffer<T> {
    pub fn new(len: usize) -> Self {
        let bytes = len.checked_mul(std::mem::size_of::<T>()).expect("buffer size overflows");
        #[cfg(target_os = "linux")]
        if bytes >= SHARED_FROM {
            if let Some((region, ptr)) = huge_pages::carve(bytes, std::mem::align_of::<T>()) {
                return Self { storage: Storage::Shared { ptr: ptr as *mut T, _region: region }, len };
            }
        }
        let _ = bytes;
        Self { storage: Storage::Heap(heap_zeroed(len)), len }
    }

    /// The `len` values at byte `offset` of `mapping`, where they lie;
    /// `None` if they do not fit in it or are misaligned for `T`.
    pub fn in_file(mapping: &std::sync::Arc<FileMapping>, offset: usize, len: usize) -> Option<Self> {
        let end = len.checked_mul(std::mem::size_of::<T>())?.checked_add(offset)?;
        // SAFETY: `offset` lies within the mapping (checked against `end`).
        let ptr = (end <= mapping.len).then(|| unsafe { mapping.start.add(offset) })?;
        if !(ptr as usize).is_multiple_of(std::mem::align_of::<T>()) {
            return None;
        }
        Some(Self { storage: Storage::File { ptr: ptr as *mut T, _mapping: mapping.clone() }, len })
    }

    /// The values' bytes.
    pub fn as_bytes(&self) -> &[u8] {
        bytes_of(self)
    }
}

/// The bytes of `values`.
pub fn bytes_of<T: Zeroed>(values: &[T]) -> &[u8] {
    // SAFETY: `Zeroed` types have no padding, so every byte is initialised.
    unsafe { std::slice::from_raw_parts(values.as_ptr() as *const u8, std::mem::size_of_val(values)) }
}

/// A whole file mapped copy-on-write: its pages are the system's file cache,
/// shared with every process that maps the file and read from disk only when
/// touched; a write (the kernels make none) would copy the page it touches
/// and leave the file as it is. Files mapped so must not be truncated while
/// mapped: Cake replaces its files by renaming new ones into place.
pub struct FileMapping {
    /// Kept for its pages; reached through `start`.
    _map: memmap2::MmapMut,
    start: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain memory; buffers carved from it never overlap.
unsafe impl Send for FileMapping {}
unsafe impl Sync for FileMapping {}

impl FileMapping {
    /// Maps `file`, asks for huge pages where the system gives them to
    /// files, and maps its pages in now rather than one fault at a time.
    pub fn open(file: &std::fs::File) -> std::io::Result<std::sync::Arc<Self>> {
        // SAFETY: a private mapping; see the type's note on truncation.
        let mut map = unsafe { memmap2::MmapOptions::new().map_copy(file)? };
        #[cfg(target_os = "linux")]
        {
            // Advice only: a system without it maps the file all the same.
            let _ = map.advise(memmap2::Advice::HugePage);
            let _ = map.advise(memmap2::Advice::PopulateRead);
        }
        let (start, len) = (map.as_mut_ptr(), map.len());
        Ok(std::sync::Arc::new(Self { _map: map, start, len }))
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

#[cfg(target_os = "linux")]
mod huge_pages {
    use std::sync::{Arc, Mutex, Weak};

    const HUGE_PAGE: usize = 2 << 20;
    /// The smallest region mapped; a larger buffer gets a region of its own size.
    const REGION_BYTES: usize = 64 << 20;

    /// One anonymous mapping, unmapped when the last buffer in it goes.
    pub struct Region {
        mapping: *mut libc::c_void,
        mapped_bytes: usize,
        /// The first 2 MiB boundary in the mapping, and the bytes after it.
        start: *mut u8,
        bytes: usize,
    }

    // SAFETY: the region is only a range of memory; buffers carved from it
    // never overlap.
    unsafe impl Send for Region {}
    unsafe impl Sync for Region {}

    impl Drop for Region {
        fn drop(&mut self) {
            // SAFETY: the mapping made in `Region::map`; no buffer borrows it any more.
            unsafe { libc::munmap(self.mapping, self.mapped_bytes) };
        }
    }

    impl Region {
        /// Maps at least `bytes` of zeroed memory starting on a huge page.
        fn map(bytes: usize) -> Option<Self> {
            let bytes = bytes.max(REGION_BYTES).checked_next_multiple_of(HUGE_PAGE)?;
            let mapped_bytes = bytes.checked_add(HUGE_PAGE)?;
            // SAFETY: a fresh private anonymous mapping, zero-filled by the
            // kernel, unmapped in `drop`.
            unsafe {
                let mapping = libc::mmap(
                    std::ptr::null_mut(),
                    mapped_bytes,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                    -1,
                    0,
                );
                if mapping == libc::MAP_FAILED {
                    return None;
                }
                let skip = (mapping as usize).next_multiple_of(HUGE_PAGE) - mapping as usize;
                let start = (mapping as *mut u8).add(skip);
                // Advice only: without transparent huge pages it changes nothing.
                libc::madvise(start as *mut libc::c_void, bytes, libc::MADV_HUGEPAGE);
                Some(Self { mapping, mapped_bytes, start, bytes })
            }
        }
    }

    /// Returns the whole pages of a dropped buffer's `bytes` at `ptr` to the
    /// system, so that a region kept alive by other buffers (another model
    /// loaded meanwhile) does not keep its memory too. The range is never
    /// handed out again.
    pub fn release(ptr: *mut u8, bytes: usize) {
        const PAGE: usize = 4096;
        let start = (ptr as usize).next_multiple_of(PAGE);
        let end = (ptr as usize + bytes) / PAGE * PAGE;
        if end > start {
            // SAFETY: whole pages inside the dropped buffer, which no other
            // buffer overlaps; advice that only discards their contents.
            unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED) };
        }
    }

    /// The region being filled and how many of its bytes are taken. Held
    /// weakly: once its buffers are gone (a model unloaded), it is unmapped
    /// and the next buffer starts a fresh region.
    static CURRENT: Mutex<Option<(Weak<Region>, usize)>> = Mutex::new(None);

    /// `bytes` never-used (so zero) bytes aligned to `align`, and the region
    /// holding them.
    pub fn carve(bytes: usize, align: usize) -> Option<(Arc<Region>, *mut u8)> {
        if align > HUGE_PAGE {
            return None;
        }
        let mut current = CURRENT.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((region, used)) = current.as_mut().and_then(|(weak, used)| Some((weak.upgrade()?, used))) {
            let offset = used.next_multiple_of(align);
            if offset.checked_add(bytes).is_some_and(|end| end <= region.bytes) {
                *used = offset + bytes;
                // SAFETY: `offset + bytes` lies within the region.
                let ptr = unsafe { region.start.add(offset) };
                return Some((region, ptr));
            }
        }
        let region = Arc::new(Region::map(bytes)?);
        let ptr = region.start;
        // A region too small to take more after this buffer is not kept.
        if region.bytes - bytes >= super::SHARED_FROM {
            *current = Some((Arc::downgrade(&region), bytes));
        }
        Some((region, ptr))
    }
}

impl<T: Zeroed> Drop for ZeroedBuffer<T> {
    fn drop(&mut self) {
        #[cfg(target_os = "linux")]
        if let Storage::Shared { ptr, .. } = &self.storage {
            // Runs before `_region` is dropped: the region is still mapped.
            huge_pages::release(*ptr as *mut u8, self.len * std::mem::size_of::<T>());
        }
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
            // SAFETY: `len` values lie at `ptr`, inside the mapping kept alive
            // here; any bit pattern is a value (`Zeroed`).
            Storage::File { ptr, .. } => unsafe { std::slice::from_raw_parts(*ptr, self.len) },
            // SAFETY: `len` initialised (zeroed) values live at `ptr`.
            #[cfg(target_os = "linux")]
            Storage::Shared { ptr, .. } => unsafe { std::slice::from_raw_parts(*ptr, self.len) },
        }
    }
}

impl<T: Zeroed> DerefMut for ZeroedBuffer<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        match &mut self.storage {
            Storage::Heap(v) => v,
            // SAFETY: as in `deref`; the mapping is copy-on-write, so a write
            // changes only this process's copy of the page.
            Storage::File { ptr, .. } => unsafe { std::slice::from_raw_parts_mut(*ptr, self.len) },
            // SAFETY: as in `deref`; `&mut self` is exclusive and no other
            // buffer overlaps this one.
            #[cfg(target_os = "linux")]
            Storage::Shared { ptr, .. } => unsafe { std::slice::from_raw_parts_mut(*ptr, self.len) },
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

    #[test]
    fn buffers_sharing_regions_do_not_overlap_and_freed_regions_come_back_zeroed() {
        for _round in 0..2 {
            let sizes = [SHARED_FROM / 8, 300_001, 3 << 20, 70 << 20, SHARED_FROM / 8 + 1];
            let mut buffers: Vec<ZeroedBuffer<u64>> = sizes.iter().map(|&n| ZeroedBuffer::new(n)).collect();
            for (b, buffer) in buffers.iter_mut().enumerate() {
                assert!(buffer.iter().all(|&v| v == 0), "buffer {b} starts zeroed");
                buffer.fill(b as u64 + 1);
            }
            // Dropping a buffer gives back its pages and nothing of its neighbours'.
            drop(buffers.remove(1));
            for (b, buffer) in buffers.iter().enumerate() {
                let value = if b == 0 { 1 } else { b as u64 + 2 };
                assert!(buffer.iter().all(|&v| v == value), "buffer {b} kept its values");
            }
        }
    }
}
