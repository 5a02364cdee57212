//! Reading `.safetensors` files without trusting them.
//!
//! A safetensors file is an 8-byte little-endian header length, a JSON header
//! that maps tensor names to dtype, shape and byte range, then the raw data.
//! [`SafetensorsHeader::read`] validates all of it against the file's real size
//! before anything is allocated, so a corrupt or truncated file produces an
//! error naming the file and the problem instead of a panic or a huge
//! allocation. It reads only the header, so callers can size layers (for
//! cluster assignment) without touching the data. [`SafetensorsFile`]
//! memory-maps a validated file and turns entries into candle tensors.

use anyhow::{bail, Context, Result};
use candle_core::{DType, Device, Tensor};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Headers larger than this are refused: real ones are a few MB at most.
const MAX_HEADER_BYTES: u64 = 100 * 1024 * 1024;

/// The element type of a stored tensor, as spelled in the header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoredDType {
    F64,
    F32,
    F16,
    BF16,
    F8E4M3,
    I64,
    I32,
    I16,
    I8,
    U8,
    Bool,
}

impl StoredDType {
    fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "F64" => Self::F64,
            "F32" => Self::F32,
            "F16" => Self::F16,
            "BF16" => Self::BF16,
            "F8_E4M3" => Self::F8E4M3,
            "I64" => Self::I64,
            "I32" => Self::I32,
            "I16" => Self::I16,
            "I8" => Self::I8,
            "U8" => Self::U8,
            "BOOL" => Self::Bool,
            _ => return None,
        })
    }

    /// Bytes per element.
    pub fn size_in_bytes(self) -> u64 {
        match self {
            Self::F64 | Self::I64 => 8,
            Self::F32 | Self::I32 => 4,
            Self::F16 | Self::BF16 | Self::I16 => 2,
            Self::F8E4M3 | Self::I8 | Self::U8 | Self::Bool => 1,
        }
    }

    /// The candle dtype that holds this type natively, if any.
    pub fn candle_dtype(self) -> Option<DType> {
        Some(match self {
            Self::F64 => DType::F64,
            Self::F32 => DType::F32,
            Self::F16 => DType::F16,
            Self::BF16 => DType::BF16,
            Self::F8E4M3 => DType::F8E4M3,
            Self::I64 => DType::I64,
            Self::U8 => DType::U8,
            _ => return None,
        })
    }
}

/// One tensor's entry in the header. Offsets are relative to the data section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorEntry {
    pub dtype: StoredDType,
    pub shape: Vec<usize>,
    pub begin: u64,
    pub end: u64,
}

impl TensorEntry {
    /// Size of the tensor's data in bytes.
    pub fn byte_size(&self) -> u64 {
        self.end - self.begin
    }
}

/// The validated header of one safetensors file.
#[derive(Debug, Clone)]
pub struct SafetensorsHeader {
    pub path: PathBuf,
    /// Absolute file offset where the data section starts.
    pub data_start: u64,
    pub tensors: BTreeMap<String, TensorEntry>,
}

#[derive(serde::Deserialize)]
struct RawEntry {
    dtype: String,
    shape: Vec<u64>,
    data_offsets: (u64, u64),
}

impl SafetensorsHeader {
    /// Reads and validates the header of `path` without reading tensor data.
    pub fn read(path: &Path) -> Result<Self> {
        let mut file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
        let file_len = file.metadata().with_context(|| format!("cannot stat {}", path.display()))?.len();
        let mut len_bytes = [0u8; 8];
        if file_len >= 8 {
            file.read_exact(&mut len_bytes).with_context(|| format!("cannot read {}", path.display()))?;
        }
        let header_len = checked_header_len(path, file_len, len_bytes)?;
        let mut header_bytes = vec![0u8; header_len as usize];
        file.read_exact(&mut header_bytes).with_context(|| format!("cannot read the header of {}", path.display()))?;
        Self::from_header_bytes(path, file_len, &header_bytes)
    }

    /// Validates a whole file already in memory (`bytes`), named `path` in errors.
    pub fn from_file_bytes(path: &Path, bytes: &[u8]) -> Result<Self> {
        let file_len = bytes.len() as u64;
        let len_bytes: [u8; 8] = bytes.get(..8).and_then(|b| b.try_into().ok()).unwrap_or_default();
        let header_len = checked_header_len(path, file_len, len_bytes)?;
        Self::from_header_bytes(path, file_len, &bytes[8..8 + header_len as usize])
    }

    fn from_header_bytes(path: &Path, file_len: u64, header_bytes: &[u8]) -> Result<Self> {
        let data_start = 8 + header_bytes.len() as u64;
        let tensors = parse_header_json(header_bytes, file_len - data_start)
            .with_context(|| format!("{}: invalid safetensors header", path.display()))?;
        Ok(Self { path: path.to_path_buf(), data_start, tensors })
    }
}

/// The header length a file of `file_len` bytes starting with `len_bytes`
/// declares, once it is known to fit the file and the limit.
fn checked_header_len(path: &Path, file_len: u64, len_bytes: [u8; 8]) -> Result<u64> {
    if file_len < 8 {
        bail!("{}: truncated safetensors file ({file_len} bytes, the header length alone needs 8)", path.display());
    }
    let header_len = u64::from_le_bytes(len_bytes);
    if header_len > MAX_HEADER_BYTES {
        bail!(
            "{}: safetensors header claims {header_len} bytes, more than the {MAX_HEADER_BYTES}-byte limit (corrupt file?)",
            path.display()
        );
    }
    if header_len > file_len - 8 {
        bail!(
            "{}: safetensors header claims {header_len} bytes but the file has only {} after the length (truncated file?)",
            path.display(),
            file_len - 8
        );
    }
    Ok(header_len)
}

fn parse_header_json(bytes: &[u8], data_len: u64) -> Result<BTreeMap<String, TensorEntry>> {
    let json: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(bytes).context("the header is not a JSON object")?;
    let mut tensors = BTreeMap::new();
    for (name, value) in json {
        if name == "__metadata__" {
            continue;
        }
        let raw: RawEntry =
            serde_json::from_value(value).with_context(|| format!("entry for tensor `{name}` is malformed"))?;
        let dtype = StoredDType::parse(&raw.dtype)
            .with_context(|| format!("tensor `{name}` has unknown dtype `{}`", raw.dtype))?;
        let (begin, end) = raw.data_offsets;
        if begin > end || end > data_len {
            bail!(
                "tensor `{name}` occupies bytes {begin}..{end}, outside the {data_len}-byte data section (truncated file?)"
            );
        }
        let elements = raw
            .shape
            .iter()
            .try_fold(1u64, |acc, &d| acc.checked_mul(d))
            .with_context(|| format!("tensor `{name}` has an absurd shape {:?}", raw.shape))?;
        let expected = elements
            .checked_mul(dtype.size_in_bytes())
            .with_context(|| format!("tensor `{name}` has an absurd shape {:?}", raw.shape))?;
        if expected != end - begin {
            bail!(
                "tensor `{name}` has shape {:?} of {:?} ({expected} bytes) but occupies {} bytes",
                raw.shape,
                dtype,
                end - begin
            );
        }
        let shape = raw.shape.iter().map(|&d| d as usize).collect();
        tensors.insert(name, TensorEntry { dtype, shape, begin, end });
    }
    check_no_overlap(&tensors)?;
    Ok(tensors)
}

fn check_no_overlap(tensors: &BTreeMap<String, TensorEntry>) -> Result<()> {
    let mut ranges: Vec<(&str, &TensorEntry)> =
        tensors.iter().filter(|(_, e)| e.byte_size() > 0).map(|(n, e)| (n.as_str(), e)).collect();
    ranges.sort_by_key(|(_, e)| e.begin);
    for pair in ranges.windows(2) {
        let (a, ea) = pair[0];
        let (b, eb) = pair[1];
        if eb.begin < ea.end {
            bail!("tensors `{a}` ({}..{}) and `{b}` ({}..{}) overlap", ea.begin, ea.end, eb.begin, eb.end);
        }
    }
    Ok(())
}

/// A validated safetensors file, memory-mapped.
pub struct SafetensorsFile {
    pub header: SafetensorsHeader,
    mmap: memmap2::Mmap,
}

impl SafetensorsFile {
    /// Validates the header, then maps the file.
    pub fn open(path: &Path) -> Result<Self> {
        let header = SafetensorsHeader::read(path)?;
        let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
        // SAFETY: the map is read-only; a model file changing underneath a
        // running app is outside what we can defend against.
        let mmap =
            unsafe { memmap2::Mmap::map(&file) }.with_context(|| format!("cannot memory-map {}", path.display()))?;
        let expected_len = header.data_start + header.tensors.values().map(|e| e.end).max().unwrap_or(0);
        if (mmap.len() as u64) < expected_len {
            bail!("{}: file shrank while opening it", path.display());
        }
        Ok(Self { header, mmap })
    }

    /// The entry for `name`, if the file holds it.
    pub fn entry(&self, name: &str) -> Option<&TensorEntry> {
        self.header.tensors.get(name)
    }

    /// Loads tensor `name` onto `device` in its stored dtype.
    pub fn load(&self, name: &str, device: &Device) -> Result<Tensor> {
        let path = self.header.path.display();
        let entry = self.entry(name).with_context(|| format!("{path}: tensor `{name}` is missing"))?;
        let dtype = entry.dtype.candle_dtype().with_context(|| {
            format!("{path}: tensor `{name}` is stored as {:?}, which the engine cannot load", entry.dtype)
        })?;
        let start = (self.header.data_start + entry.begin) as usize;
        let end = (self.header.data_start + entry.end) as usize;
        Tensor::from_raw_buffer(&self.mmap[start..end], dtype, &entry.shape, device)
            .with_context(|| format!("{path}: cannot load tensor `{name}`"))
    }
}
