//! Reading single-file GGUF models without trusting them.
//!
//! candle's GGUF parser already bounds every length it reads by the file's
//! size; this module adds what it leaves to the caller: every tensor's byte
//! range must lie inside the file and be aligned, errors name the file, and
//! tensor data is sliced from a memory map instead of read into buffers.
//! Metadata helpers turn missing or mistyped keys into clear errors.

use anyhow::{bail, Context, Result};
use candle_core::quantized::gguf_file::{Content, TensorInfo, Value};
use candle_core::quantized::{ggml_file, GgmlDType, QTensor};
use candle_core::Device;
use std::fs::File;
use std::path::{Path, PathBuf};

/// A validated, memory-mapped GGUF file.
pub struct GgufFile {
    pub path: PathBuf,
    pub content: Content,
    mmap: std::sync::Arc<memmap2::Mmap>,
}

impl GgufFile {
    /// Parses the header of `path` and checks every tensor's byte range.
    pub fn open(path: &Path) -> Result<Self> {
        let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
        let file_len = file
            .metadata()
            .with_context(|| format!("cannot stat {}", path.display()))?
            .len();
        if file_len < 8 {
            bail!("{}: not a GGUF file ({file_len} bytes, truncated?)", path.display());
        }
        // SAFETY: read-only map of the file; every range read from it is
        // checked against its length first (see SafetensorsFile).
        let mmap = unsafe { memmap2::Mmap::map(&file) }
            .with_context(|| format!("cannot memory-map {}", path.display()))?;
        if (mmap.len() as u64) < file_len {
            bail!("{}: file shrank while opening it", path.display());
        }
        // Parsed from the map: a tokenizer's tens of thousands of strings
        // would otherwise cost a system call each.
        let mut reader = std::io::Cursor::new(&mmap[..]);
        let content = Content::read(&mut reader).map_err(|e| {
            // candle may append a backtrace after the first line.
            let reason = e.to_string().lines().next().unwrap_or_default().to_string();
            let reason = if reason.contains("failed to fill whole buffer") {
                "the file ends inside its header (truncated file?)".to_string()
            } else if reason.contains("remaining") {
                format!("{reason} (truncated file?)")
            } else if reason.contains("unknown magic") {
                format!("not a GGUF file ({reason})")
            } else {
                reason
            };
            anyhow::anyhow!("{}: invalid GGUF header: {reason}", path.display())
        })?;
        for (name, info) in &content.tensor_infos {
            check_tensor_range(name, info, content.tensor_data_offset, file_len)
                .with_context(|| format!("{}: invalid GGUF tensor table", path.display()))?;
        }
        Ok(Self {
            path: path.to_path_buf(),
            content,
            mmap: std::sync::Arc::new(mmap),
        })
    }

    /// The metadata value under `key`, if present.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.content.metadata.get(key)
    }

    /// A required metadata value.
    pub fn require(&self, key: &str) -> Result<&Value> {
        self.get(key).with_context(|| {
            format!("{}: GGUF metadata key `{key}` is missing", self.path.display())
        })
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
            .map(|v| {
                value_to_f64(v)
                    .with_context(|| format!("{}: `{key}` is not a number", self.path.display()))
            })
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
        self.content.tensor_infos.get(name)
    }

    /// The raw bytes of tensor `name`.
    pub fn tensor_bytes(&self, name: &str) -> Result<&[u8]> {
        let start = self.tensor_offset(name)?;
        let len = byte_size(&self.content.tensor_infos[name])? as usize;
        Ok(&self.mmap[start..start + len])
    }

    /// Where tensor `name`'s data starts in the file (and the map).
    pub fn tensor_offset(&self, name: &str) -> Result<usize> {
        let info = self.tensor_info(name).with_context(|| format!("{}: tensor `{name}` is missing", self.path.display()))?;
        Ok((self.content.tensor_data_offset + info.offset) as usize)
    }

    /// The whole file's memory map, to read tensors where they lie.
    pub fn map(&self) -> &std::sync::Arc<memmap2::Mmap> {
        &self.mmap
    }

    /// Maps all of tensor `name`'s pages into this process at once (reading
    /// them from disk if they are not cached), which is much cheaper than
    /// faulting them in one by one as they are first read. Advice only: where
    /// the system lacks it, pages are faulted in as they are read.
    pub fn populate(&self, name: &str) {
        #[cfg(target_os = "linux")]
        if let Some((start, len)) = self.tensor_range(name) {
            let _ = self.mmap.advise_range(memmap2::Advice::PopulateRead, start, len);
        }
        #[cfg(not(target_os = "linux"))]
        let _ = name;
    }

    /// Lets the operating system drop this process's mapped pages of tensor
    /// `name`, once its data has been copied or repacked: they stay in the
    /// page cache (and are read again if touched), but no longer count in
    /// the process's resident memory twice.
    pub fn release(&self, name: &str) {
        let Some((start, len)) = self.tensor_range(name) else { return };
        // SAFETY: a read-only shared file mapping: dropped pages hold no
        // changes and are faulted in again from the file if read.
        let _ = unsafe { self.mmap.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start, len) };
    }

    /// Where tensor `name`'s bytes lie in the map: (start, length).
    fn tensor_range(&self, name: &str) -> Option<(usize, usize)> {
        let info = self.tensor_info(name)?;
        let len = byte_size(info).ok()?;
        Some(((self.content.tensor_data_offset + info.offset) as usize, len as usize))
    }

    /// Loads tensor `name` as a (possibly quantized) candle tensor.
    pub fn qtensor(&self, name: &str, device: &Device) -> Result<QTensor> {
        let info = self.tensor_info(name).with_context(|| {
            format!("{}: tensor `{name}` is missing", self.path.display())
        })?;
        qtensor_from_bytes(info.ggml_dtype, self.tensor_bytes(name)?, info.shape.dims(), device)
            .with_context(|| format!("{}: cannot load tensor `{name}`", self.path.display()))
    }
}

/// Builds a quantized tensor of `dims` from raw GGML block bytes.
pub fn qtensor_from_bytes(
    dtype: GgmlDType,
    bytes: &[u8],
    dims: &[usize],
    device: &Device,
) -> Result<QTensor> {
    let elements: usize = dims.iter().product();
    let expected = elements / dtype.block_size() * dtype.type_size();
    if elements % dtype.block_size() != 0 || bytes.len() != expected {
        bail!("{} bytes do not hold a {dtype:?} tensor of shape {dims:?}", bytes.len());
    }
    Ok(ggml_file::qtensor_from_ggml(dtype, bytes, dims.to_vec(), device)?)
}

/// Bytes a tensor occupies in the file.
pub fn byte_size(info: &TensorInfo) -> Result<u64> {
    let elements = info
        .shape
        .dims()
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d as u64))
        .context("tensor shape overflows")?;
    let block = info.ggml_dtype.block_size() as u64;
    if elements % block != 0 {
        bail!(
            "{elements} elements are not a whole number of {:?} blocks",
            info.ggml_dtype
        );
    }
    (elements / block)
        .checked_mul(info.ggml_dtype.type_size() as u64)
        .context("tensor size overflows")
}

fn check_tensor_range(name: &str, info: &TensorInfo, data_offset: u64, file_len: u64) -> Result<()> {
    let size = byte_size(info).with_context(|| format!("tensor `{name}`"))?;
    let start = data_offset
        .checked_add(info.offset)
        .with_context(|| format!("tensor `{name}` has an absurd offset"))?;
    let end = start
        .checked_add(size)
        .with_context(|| format!("tensor `{name}` has an absurd size"))?;
    if end > file_len {
        bail!(
            "tensor `{name}` needs bytes {start}..{end} but the file has {file_len} (truncated file?)"
        );
    }
    if start % 4 != 0 {
        bail!("tensor `{name}` starts at unaligned offset {start}");
    }
    Ok(())
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
