//! Reading single-file GGUF models without trusting them.
//!
//! The header is parsed by [`super::gguf_header`], which bounds every count
//! and length by the file's size and checks that every tensor's bytes lie
//! inside the file, aligned and apart; errors name the file. Tensor data is
//! sliced from a memory map instead of read into buffers. Metadata helpers
//! turn missing or mistyped keys into clear errors.

pub use super::gguf_header::{GgmlType, Header, TensorInfo, Value};
use anyhow::{bail, Context, Result};
use candle_core::quantized::{ggml_file, GgmlDType, QTensor};
use candle_core::Device;
use std::fs::File;
use std::path::{Path, PathBuf};

/// A validated, memory-mapped GGUF file.
pub struct GgufFile {
    pub path: PathBuf,
    pub header: Header,
    mmap: std::sync::Arc<memmap2::Mmap>,
    /// The open file, to read copies without touching the map.
    file: File,
}

impl GgufFile {
    /// Parses the header of `path` and checks every tensor's byte range.
    pub fn open(path: &Path) -> Result<Self> {
        let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
        let file_len = file.metadata().with_context(|| format!("cannot stat {}", path.display()))?.len();
        if file_len < 8 {
            bail!("{}: not a GGUF file ({file_len} bytes, truncated?)", path.display());
        }
        // SAFETY: read-only map of the file; every range read from it is
        // checked against its length first (see SafetensorsFile).
        let mmap =
            unsafe { memmap2::Mmap::map(&file) }.with_context(|| format!("cannot memory-map {}", path.display()))?;
        if (mmap.len() as u64) < file_len {
            bail!("{}: file shrank while opening it", path.display());
        }
        // Parsed from the map: a tokenizer's tens of thousands of strings
        // would otherwise cost a system call each.
        let header = super::gguf_header::parse(&mmap[..], file_len)
            .map_err(|e| anyhow::anyhow!("{}: invalid GGUF header: {e}", path.display()))?;
        // A file of float tensors is read where it lies: huge pages over
        // the whole map, which its matrices of under 2 MB get in no other
        // way (135M BF16 decode: 97–103 tok/s with advice per tensor,
        // 110–113 with this). Files holding quantized matrices take it per
        // tensor read in place (`populate`).
        #[cfg(target_os = "linux")]
        if header.tensor_infos.values().all(|t| matches!(t.ggml_type, GgmlType::F32 | GgmlType::F16 | GgmlType::BF16)) {
            let _ = mmap.advise(memmap2::Advice::HugePage);
        }
        Ok(Self { path: path.to_path_buf(), header, mmap: std::sync::Arc::new(mmap), file })
    }

    /// A copy of `bytes`, a slice of this file's map, read from the file
    /// instead of through the map. Reading a small tensor (a norm, a bias)
    /// through the map would map in the whole cached folio around it, up to
    /// hundreds of kilobytes of its neighbours (which may be held elsewhere,
    /// in the tile cache): 35 MB of a 92 MB file's matrices for its norms.
    pub fn copy_of(&self, bytes: &[u8]) -> Result<Vec<u8>> {
        let offset = (bytes.as_ptr() as usize).checked_sub(self.mmap.as_ptr() as usize);
        let offset = offset.filter(|&at| at + bytes.len() <= self.mmap.len());
        let Some(offset) = offset else { bail!("{}: bytes outside the file's map", self.path.display()) };
        #[cfg(unix)]
        {
            use std::os::unix::fs::FileExt;
            let mut copy = vec![0u8; bytes.len()];
            self.file
                .read_exact_at(&mut copy, offset as u64)
                .with_context(|| format!("cannot read {} at byte {offset}", self.path.display()))?;
            Ok(copy)
        }
        #[cfg(not(unix))]
        {
            let _ = offset;
            Ok(bytes.to_vec())
        }
    }

    /// The metadata value under `key`, if present.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.header.metadata.get(key)
    }

    /// A required metadata value.
    pub fn require(&self, key: &str) -> Result<&Value> {
        self.get(key).with_context(|| format!("{}: GGUF metadata key `{key}` is missing", self.path.display()))
    }

    /// A required integer metadata value.
    pub fn require_usize(&self, key: &str) -> Result<usize> {
        let value = self.require(key)?;
        value_to_u64(value)
            .map(|v| v as usize)
            .with_context(|| format!("{}: `{key}` is not an integer", self.path.display()))
    }

    /// An optional float metadata value.
    pub fn get_f64(&self, key: &str) -> Result<Option<f64>> {
        self.get(key)
            .map(|v| value_to_f64(v).with_context(|| format!("{}: `{key}` is not a number", self.path.display())))
            .transpose()
    }

    /// An optional string metadata value.
    pub fn get_str(&self, key: &str) -> Option<&str> {
        match self.get(key) {
            Some(Value::String(s)) => Some(s.as_str()),
            _ => None,
        }
    }

    /// The shape (row-major, outermost first) and type of a tensor.
    pub fn tensor_info(&self, name: &str) -> Option<&TensorInfo> {
        self.header.tensor_infos.get(name)
    }

    /// The raw bytes of tensor `name`.
    pub fn tensor_bytes(&self, name: &str) -> Result<&[u8]> {
        let (start, len) =
            self.tensor_range(name).with_context(|| format!("{}: tensor `{name}` is missing", self.path.display()))?;
        Ok(&self.mmap[start..start + len])
    }

    /// Where tensor `name`'s data starts in the file (and the map).
    pub fn tensor_offset(&self, name: &str) -> Result<usize> {
        let info =
            self.tensor_info(name).with_context(|| format!("{}: tensor `{name}` is missing", self.path.display()))?;
        Ok((self.header.tensor_data_offset + info.offset) as usize)
    }

    /// The whole file's memory map, to read tensors where they lie.
    pub fn map(&self) -> &std::sync::Arc<memmap2::Mmap> {
        &self.mmap
    }

    /// Maps all of tensor `name`'s pages into this process at once (reading
    /// them from disk if they are not cached), which is much cheaper than
    /// faulting them in one by one as they are first read. Advice only: where
    /// the system lacks it, pages are faulted in as they are read.
    ///
    /// Matrices read where they lie (Q8_0, f32, f16, bf16) are streamed
    /// whole at every token: where the system keeps the file in huge pages,
    /// their pages are mapped so, rather than through thousands of
    /// small-page TLB entries. Only theirs: a huge page mapped for one
    /// tensor maps its neighbours too, and a neighbour held elsewhere (in
    /// the tile cache, say) would then count twice in resident memory
    /// (135M Q6_K file: 208 MB against llama.cpp's 182 MB).
    pub fn populate(&self, name: &str) {
        #[cfg(target_os = "linux")]
        if let Some((first, len)) = self.tensor_range(name).and_then(|range| self.whole_pages(range)) {
            let _ = self.mmap.advise_range(memmap2::Advice::HugePage, first, len);
        }
        #[cfg(target_os = "linux")]
        if let Some((start, len)) = self.tensor_range(name) {
            let _ = self.mmap.advise_range(memmap2::Advice::PopulateRead, start, len);
        }
        #[cfg(not(target_os = "linux"))]
        let _ = name;
    }

    /// Asks the operating system to start reading from disk, in the
    /// background, the tensors whose names start with `prefix` (a layer's,
    /// `blk.3.`, or one tensor's full name), so that the disk works while
    /// the loader repacks what came before. Advice only, and free for pages
    /// already cached; the advice is given on a short-lived thread because
    /// submitting the reads can wait on a busy disk.
    pub fn read_ahead(&self, prefix: &str) {
        let ranges: Vec<(usize, usize)> = self
            .header
            .tensor_infos
            .keys()
            .filter(|name| name.starts_with(prefix))
            .filter_map(|name| self.tensor_range(name))
            .collect();
        #[cfg(unix)]
        if !ranges.is_empty() {
            let map = self.mmap.clone();
            let _ = std::thread::Builder::new().name("cake-read-ahead".into()).spawn(move || {
                for (start, len) in ranges {
                    let _ = map.advise_range(memmap2::Advice::WillNeed, start, len);
                }
            });
        }
        #[cfg(not(unix))]
        let _ = ranges;
    }

    /// Lets the operating system drop this process's mapped pages of tensor
    /// `name`, once its data has been copied or repacked: they stay in the
    /// page cache (and are read again if touched), but no longer count in
    /// the process's resident memory twice.
    ///
    /// Only the pages wholly inside the tensor are dropped: its first and
    /// last may hold a neighbour read where it lies.
    pub fn release(&self, name: &str) {
        if let Some((first, len)) = self.tensor_range(name).and_then(|range| self.whole_pages(range)) {
            // SAFETY: a read-only shared file mapping: dropped pages hold no
            // changes and are faulted in again from the file if read.
            let _ = unsafe { self.mmap.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, first, len) };
        }
    }

    /// The pages wholly inside byte range `(start, len)` of the map, if
    /// any: the first and last pages of a tensor may hold its neighbours.
    fn whole_pages(&self, (start, len): (usize, usize)) -> Option<(usize, usize)> {
        const PAGE: usize = 4096;
        let base = self.mmap.as_ptr() as usize;
        let first = (base + start).next_multiple_of(PAGE) - base;
        let end = (base + start + len) / PAGE * PAGE - base;
        (end > first).then(|| (first, end - first))
    }

    /// Where tensor `name`'s bytes lie in the map: (start, length).
    fn tensor_range(&self, name: &str) -> Option<(usize, usize)> {
        let info = self.tensor_info(name)?;
        Some(((self.header.tensor_data_offset + info.offset) as usize, info.byte_size() as usize))
    }
}

/// candle's name for a GGML type, where candle has the type.
pub fn candle_type(ggml_type: GgmlType) -> Option<GgmlDType> {
    Some(match ggml_type {
        GgmlType::F32 => GgmlDType::F32,
        GgmlType::F16 => GgmlDType::F16,
        GgmlType::BF16 => GgmlDType::BF16,
        GgmlType::Q4_0 => GgmlDType::Q4_0,
        GgmlType::Q4_1 => GgmlDType::Q4_1,
        GgmlType::Q5_0 => GgmlDType::Q5_0,
        GgmlType::Q5_1 => GgmlDType::Q5_1,
        GgmlType::Q8_0 => GgmlDType::Q8_0,
        GgmlType::Q8_1 => GgmlDType::Q8_1,
        GgmlType::Q2_K => GgmlDType::Q2K,
        GgmlType::Q3_K => GgmlDType::Q3K,
        GgmlType::Q4_K => GgmlDType::Q4K,
        GgmlType::Q5_K => GgmlDType::Q5K,
        GgmlType::Q6_K => GgmlDType::Q6K,
        GgmlType::Q8_K => GgmlDType::Q8K,
        _ => return None,
    })
}

/// Builds a candle tensor of `dims` from raw GGML block bytes. Types neither
/// candle nor Cake's kernels can multiply are refused by name.
pub fn qtensor_from_bytes(ggml_type: GgmlType, bytes: &[u8], dims: &[usize], device: &Device) -> Result<QTensor> {
    let Some(dtype) = candle_type(ggml_type) else {
        bail!("{ggml_type} tensors are not supported yet (Cake reads F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K to Q6_K, IQ4_NL and IQ4_XS)");
    };
    let elements = dims.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d as u64));
    if elements.and_then(|e| ggml_type.bytes_for(e)) != Some(bytes.len() as u64) {
        bail!("{} bytes do not hold a {ggml_type} tensor of shape {dims:?}", bytes.len());
    }
    Ok(ggml_file::qtensor_from_ggml(dtype, bytes, dims.to_vec(), device)?)
}

/// An integer metadata value of any width.
pub fn value_to_u64(value: &Value) -> Option<u64> {
    Some(match value {
        Value::U8(v) => *v as u64,
        Value::U16(v) => *v as u64,
        Value::U32(v) => *v as u64,
        Value::U64(v) => *v,
        Value::I8(v) if *v >= 0 => *v as u64,
        Value::I16(v) if *v >= 0 => *v as u64,
        Value::I32(v) if *v >= 0 => *v as u64,
        Value::I64(v) if *v >= 0 => *v as u64,
        _ => return None,
    })
}

/// A numeric metadata value as f64.
pub fn value_to_f64(value: &Value) -> Option<f64> {
    match value {
        Value::F32(v) => Some(*v as f64),
        Value::F64(v) => Some(*v),
        other => value_to_u64(other).map(|v| v as f64),
    }
}
