//! The GGUF header (metadata and tensor table), parsed from bytes that are
//! not trusted.
//!
//! The layout is ggml's `gguf.cpp` / the GGUF specification (`docs/gguf.md`
//! in ggml): magic `GGUF`, version 2 or 3, tensor and key counts, the
//! key–value pairs, the tensor table, then the tensor data from the next
//! multiple of `general.alignment` (32 unless set). Every count, length and
//! size is checked against the bytes that remain before anything of that
//! size is allocated, so a header that claims a billion tensors or a
//! terabyte string costs nothing but an error.
//!
//! The tensor types are ggml's `ggml_type` ids with their block sizes
//! ([`GgmlType`]); every type a current llama.cpp can write is known here,
//! so a file of a type Cake cannot multiply is refused by name, not as
//! "unknown".

use std::collections::HashMap;
use std::fmt;

/// Most dimensions a GGML tensor has.
const MAX_DIMS: usize = 4;
/// Deepest nesting of arrays inside arrays accepted in metadata.
const MAX_ARRAY_DEPTH: usize = 2;
/// Where tensor data starts unless `general.alignment` says otherwise.
const DEFAULT_ALIGNMENT: u64 = 32;

/// A GGML tensor type, as ggml's `ggml_type` numbers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[allow(non_camel_case_types)]
pub enum GgmlType {
    F32,
    F16,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
    Q8_1,
    Q2_K,
    Q3_K,
    Q4_K,
    Q5_K,
    Q6_K,
    Q8_K,
    IQ2_XXS,
    IQ2_XS,
    IQ3_XXS,
    IQ1_S,
    IQ4_NL,
    IQ3_S,
    IQ2_S,
    IQ4_XS,
    I8,
    I16,
    I32,
    I64,
    F64,
    IQ1_M,
    BF16,
    TQ1_0,
    TQ2_0,
    MXFP4,
}

impl GgmlType {
    /// The type with ggml id `id`, if there is one.
    pub fn from_id(id: u32) -> Option<Self> {
        use GgmlType::*;
        Some(match id {
            0 => F32,
            1 => F16,
            2 => Q4_0,
            3 => Q4_1,
            6 => Q5_0,
            7 => Q5_1,
            8 => Q8_0,
            9 => Q8_1,
            10 => Q2_K,
            11 => Q3_K,
            12 => Q4_K,
            13 => Q5_K,
            14 => Q6_K,
            15 => Q8_K,
            16 => IQ2_XXS,
            17 => IQ2_XS,
            18 => IQ3_XXS,
            19 => IQ1_S,
            20 => IQ4_NL,
            21 => IQ3_S,
            22 => IQ2_S,
            23 => IQ4_XS,
            24 => I8,
            25 => I16,
            26 => I32,
            27 => I64,
            28 => F64,
            29 => IQ1_M,
            30 => BF16,
            34 => TQ1_0,
            35 => TQ2_0,
            39 => MXFP4,
            _ => return None,
        })
    }

    /// (values per block, bytes per block), from ggml's type traits.
    pub fn block(self) -> (u64, u64) {
        use GgmlType::*;
        match self {
            F32 | I32 => (1, 4),
            F16 | BF16 | I16 => (1, 2),
            I8 => (1, 1),
            I64 | F64 => (1, 8),
            Q4_0 => (32, 18),
            Q4_1 => (32, 20),
            Q5_0 => (32, 22),
            Q5_1 => (32, 24),
            Q8_0 => (32, 34),
            Q8_1 => (32, 36),
            IQ4_NL => (32, 18),
            MXFP4 => (32, 17),
            Q2_K => (256, 84),
            Q3_K => (256, 110),
            Q4_K => (256, 144),
            Q5_K => (256, 176),
            Q6_K => (256, 210),
            Q8_K => (256, 292),
            IQ2_XXS => (256, 66),
            IQ2_XS => (256, 74),
            IQ3_XXS => (256, 98),
            IQ1_S => (256, 50),
            IQ3_S => (256, 110),
            IQ2_S => (256, 82),
            IQ4_XS => (256, 136),
            IQ1_M => (256, 56),
            TQ1_0 => (256, 54),
            TQ2_0 => (256, 66),
        }
    }

    /// The name llama.cpp uses (`Q4_K`, `IQ4_XS`, `BF16`, …).
    pub fn name(self) -> String {
        format!("{self:?}")
    }

    /// Bytes that `elements` values take, if they are whole blocks.
    pub fn bytes_for(self, elements: u64) -> Option<u64> {
        let (values, bytes) = self.block();
        elements.is_multiple_of(values).then(|| elements / values).and_then(|blocks| blocks.checked_mul(bytes))
    }
}

impl fmt::Display for GgmlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:?}")
    }
}

/// A metadata value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    U64(u64),
    I64(i64),
    F32(f32),
    F64(f64),
    Bool(bool),
    String(String),
    Array(Vec<Value>),
}

/// One entry of the tensor table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorInfo {
    /// Dimensions, outermost first (row-major; GGUF stores them innermost first).
    pub dims: Vec<usize>,
    pub ggml_type: GgmlType,
    /// Where the data starts, from the start of the data section.
    pub offset: u64,
}

impl TensorInfo {
    /// Values in the tensor.
    pub fn elements(&self) -> u64 {
        // Checked when the table was read: the product fits.
        self.dims.iter().map(|&d| d as u64).product()
    }

    /// Bytes the tensor's data takes.
    pub fn byte_size(&self) -> u64 {
        // Checked when the table was read: whole blocks, and the size fits.
        self.ggml_type.bytes_for(self.elements()).unwrap_or(u64::MAX)
    }
}

/// A parsed header.
#[derive(Debug, Clone)]
pub struct Header {
    pub version: u32,
    pub metadata: HashMap<String, Value>,
    pub tensor_infos: HashMap<String, TensorInfo>,
    /// Where tensor data starts in the file.
    pub tensor_data_offset: u64,
}

/// Why a header was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    #[error("not a GGUF file (it starts with {0:02x?}, not `GGUF`)")]
    NotGguf([u8; 4]),
    #[error("GGUF version {0} is not supported (versions 2 and 3 are)")]
    Version(u32),
    #[error("the file ends inside its header, at byte {0} (truncated file?)")]
    Truncated(u64),
    #[error("{0}")]
    Invalid(String),
}

type Parsed<T> = Result<T, HeaderError>;

fn invalid<T>(message: impl Into<String>) -> Parsed<T> {
    Err(HeaderError::Invalid(message.into()))
}

/// Reads a header from the start of `bytes` (the whole file, or at least
/// its header), checking it against `file_len`, the file's full size.
pub fn parse(bytes: &[u8], file_len: u64) -> Parsed<Header> {
    let mut r = Reader { bytes, at: 0 };
    let magic: [u8; 4] = r.take(4)?.try_into().expect("4 bytes");
    if &magic != b"GGUF" {
        return Err(HeaderError::NotGguf(magic));
    }
    let version = r.u32()?;
    if !(2..=3).contains(&version) {
        return Err(HeaderError::Version(version));
    }
    let tensor_count = r.u64()?;
    let kv_count = r.u64()?;
    // A key is at least a length and a type (12 bytes), a tensor entry at
    // least a name length, a dimension count, a type and an offset (24).
    r.check_count(kv_count, 12, "metadata keys")?;
    r.check_count(tensor_count, 24, "tensors")?;
    let mut metadata = HashMap::with_capacity(kv_count as usize);
    for _ in 0..kv_count {
        let key = r.string()?;
        let value_type = r.u32()?;
        let value = r.value(value_type, 0).map_err(|e| in_key(e, &key))?;
        if metadata.insert(key.clone(), value).is_some() {
            return invalid(format!("metadata key `{key}` appears twice"));
        }
    }
    let alignment = match metadata.get("general.alignment") {
        None => DEFAULT_ALIGNMENT,
        Some(Value::U32(a)) if a.is_power_of_two() => *a as u64,
        Some(other) => return invalid(format!("`general.alignment` must be a power of two (u32), found {other:?}")),
    };
    let mut tensor_infos = HashMap::with_capacity(tensor_count as usize);
    for _ in 0..tensor_count {
        let name = r.string()?;
        let info = r.tensor_info().map_err(|e| in_tensor(e, &name))?;
        if info.offset % alignment != 0 {
            return invalid(format!(
                "tensor `{name}` starts at offset {} that is not a multiple of the alignment {alignment}",
                info.offset
            ));
        }
        if tensor_infos.insert(name.clone(), info).is_some() {
            return invalid(format!("tensor `{name}` appears twice"));
        }
    }
    let tensor_data_offset = (r.at as u64).div_ceil(alignment) * alignment;
    check_data(&tensor_infos, tensor_data_offset, file_len)?;
    Ok(Header { version, metadata, tensor_infos, tensor_data_offset })
}

/// Every tensor's data lies inside the file, and no two overlap.
fn check_data(tensors: &HashMap<String, TensorInfo>, data_offset: u64, file_len: u64) -> Parsed<()> {
    let mut ranges: Vec<(u64, u64, &str)> = Vec::with_capacity(tensors.len());
    for (name, info) in tensors {
        let start = data_offset.checked_add(info.offset);
        let end = start.and_then(|s| s.checked_add(info.byte_size()));
        let (Some(start), Some(end)) = (start, end) else {
            return invalid(format!("tensor `{name}` has an absurd offset or size"));
        };
        if end > file_len {
            return invalid(format!(
                "tensor `{name}` needs bytes {start}..{end} but the file has {file_len} (truncated file?)"
            ));
        }
        ranges.push((start, end, name));
    }
    ranges.sort_unstable();
    for pair in ranges.windows(2) {
        let ((_, end, first), (start, _, second)) = (pair[0], pair[1]);
        if start < end {
            return invalid(format!("tensors `{first}` and `{second}` overlap"));
        }
    }
    Ok(())
}

fn in_key(error: HeaderError, key: &str) -> HeaderError {
    match error {
        HeaderError::Invalid(m) => HeaderError::Invalid(format!("metadata key `{key}`: {m}")),
        other => other,
    }
}

fn in_tensor(error: HeaderError, name: &str) -> HeaderError {
    match error {
        HeaderError::Invalid(m) => HeaderError::Invalid(format!("tensor `{name}`: {m}")),
        other => other,
    }
}

/// A cursor over the header's bytes.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn remaining(&self) -> u64 {
        (self.bytes.len() - self.at) as u64
    }

    fn take(&mut self, n: u64) -> Parsed<&'a [u8]> {
        if n > self.remaining() {
            return Err(HeaderError::Truncated(self.bytes.len() as u64));
        }
        let slice = &self.bytes[self.at..self.at + n as usize];
        self.at += n as usize;
        Ok(slice)
    }

    fn array<const N: usize>(&mut self) -> Parsed<[u8; N]> {
        Ok(self.take(N as u64)?.try_into().expect("N bytes"))
    }

    fn u32(&mut self) -> Parsed<u32> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    fn u64(&mut self) -> Parsed<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// Refuses `count` items of at least `min_bytes` each that cannot fit
    /// in what is left of the file.
    fn check_count(&self, count: u64, min_bytes: u64, what: &str) -> Parsed<()> {
        match count.checked_mul(min_bytes) {
            Some(needed) if needed <= self.remaining() => Ok(()),
            _ => invalid(format!("the header claims {count} {what}, more than the file's {} remaining bytes can hold (truncated or corrupt file?)", self.remaining())),
        }
    }

    fn string(&mut self) -> Parsed<String> {
        let len = self.u64()?;
        if len > self.remaining() {
            return invalid(format!(
                "a string of {len} bytes is longer than the rest of the file ({} bytes; truncated file?)",
                self.remaining()
            ));
        }
        Ok(String::from_utf8_lossy(self.take(len)?).into_owned())
    }

    fn value(&mut self, value_type: u32, depth: usize) -> Parsed<Value> {
        Ok(match value_type {
            0 => Value::U8(self.array::<1>()?[0]),
            1 => Value::I8(self.array::<1>()?[0] as i8),
            2 => Value::U16(u16::from_le_bytes(self.array()?)),
            3 => Value::I16(i16::from_le_bytes(self.array()?)),
            4 => Value::U32(self.u32()?),
            5 => Value::I32(i32::from_le_bytes(self.array()?)),
            6 => Value::F32(f32::from_le_bytes(self.array()?)),
            7 => match self.array::<1>()?[0] {
                0 => Value::Bool(false),
                1 => Value::Bool(true),
                other => return invalid(format!("a boolean of value {other}")),
            },
            8 => Value::String(self.string()?),
            9 => {
                if depth >= MAX_ARRAY_DEPTH {
                    return invalid(format!("arrays nested more than {MAX_ARRAY_DEPTH} deep"));
                }
                let item_type = self.u32()?;
                let len = self.u64()?;
                self.check_count(len, min_value_bytes(item_type)?, "array items")?;
                let mut items = Vec::with_capacity(len as usize);
                for _ in 0..len {
                    items.push(self.value(item_type, depth + 1)?);
                }
                Value::Array(items)
            }
            10 => Value::U64(self.u64()?),
            11 => Value::I64(i64::from_le_bytes(self.array()?)),
            12 => Value::F64(f64::from_le_bytes(self.array()?)),
            other => return invalid(format!("unknown value type {other}")),
        })
    }

    fn tensor_info(&mut self) -> Parsed<TensorInfo> {
        let n_dims = self.u32()? as usize;
        if n_dims == 0 || n_dims > MAX_DIMS {
            return invalid(format!("{n_dims} dimensions (1 to {MAX_DIMS} allowed)"));
        }
        let mut dims = Vec::with_capacity(n_dims);
        let mut elements = 1u64;
        for _ in 0..n_dims {
            let d = self.u64()?;
            elements = elements
                .checked_mul(d)
                .filter(|&e| e <= i64::MAX as u64)
                .ok_or_else(|| HeaderError::Invalid("its dimensions multiply past 2^63".into()))?;
            dims.push(
                usize::try_from(d)
                    .map_err(|_| HeaderError::Invalid(format!("dimension {d} does not fit this machine")))?,
            );
        }
        dims.reverse();
        let id = self.u32()?;
        let ggml_type =
            GgmlType::from_id(id).ok_or_else(|| HeaderError::Invalid(format!("unknown GGML type id {id}")))?;
        let offset = self.u64()?;
        if ggml_type.bytes_for(elements).is_none() {
            let (block, _) = ggml_type.block();
            return invalid(format!("{elements} values are not whole {ggml_type} blocks of {block} (or too many)"));
        }
        if dims.last().is_some_and(|&inner| !(inner as u64).is_multiple_of(ggml_type.block().0)) {
            return invalid(format!(
                "rows of {} values are not whole {ggml_type} blocks of {}",
                dims[dims.len() - 1],
                ggml_type.block().0
            ));
        }
        Ok(TensorInfo { dims, ggml_type, offset })
    }
}

/// The least bytes one value of `value_type` takes.
fn min_value_bytes(value_type: u32) -> Parsed<u64> {
    Ok(match value_type {
        0 | 1 | 7 => 1,
        2 | 3 => 2,
        4..=6 => 4,
        8 | 10..=12 => 8,
        9 => 12,
        other => return invalid(format!("unknown array item type {other}")),
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Writes GGUF headers for tests.
    #[derive(Default)]
    pub(crate) struct Writer {
        kvs: Vec<u8>,
        kv_count: u64,
        tensors: Vec<u8>,
        tensor_count: u64,
    }

    impl Writer {
        pub(crate) fn string(out: &mut Vec<u8>, s: &str) {
            out.extend((s.len() as u64).to_le_bytes());
            out.extend(s.as_bytes());
        }

        pub(crate) fn kv_str(mut self, key: &str, value: &str) -> Self {
            Self::string(&mut self.kvs, key);
            self.kvs.extend(8u32.to_le_bytes());
            Self::string(&mut self.kvs, value);
            self.kv_count += 1;
            self
        }

        pub(crate) fn kv_raw(mut self, key: &str, value_type: u32, value: &[u8]) -> Self {
            Self::string(&mut self.kvs, key);
            self.kvs.extend(value_type.to_le_bytes());
            self.kvs.extend(value);
            self.kv_count += 1;
            self
        }

        /// `dims` outermost first, as [`TensorInfo::dims`].
        pub(crate) fn tensor(mut self, name: &str, dims: &[u64], type_id: u32, offset: u64) -> Self {
            Self::string(&mut self.tensors, name);
            self.tensors.extend((dims.len() as u32).to_le_bytes());
            for d in dims.iter().rev() {
                self.tensors.extend(d.to_le_bytes());
            }
            self.tensors.extend(type_id.to_le_bytes());
            self.tensors.extend(offset.to_le_bytes());
            self.tensor_count += 1;
            self
        }

        /// The header, padded to 32 bytes, then `data`.
        pub(crate) fn finish(self, data: &[u8]) -> Vec<u8> {
            let mut out = b"GGUF".to_vec();
            out.extend(3u32.to_le_bytes());
            out.extend(self.tensor_count.to_le_bytes());
            out.extend(self.kv_count.to_le_bytes());
            out.extend(self.kvs);
            out.extend(self.tensors);
            out.resize(out.len().div_ceil(32) * 32, 0);
            out.extend(data);
            out
        }
    }

    fn parsed(bytes: &[u8]) -> Parsed<Header> {
        parse(bytes, bytes.len() as u64)
    }

    #[test]
    fn a_small_file_reads_back() {
        let array: Vec<u8> = [8u32.to_le_bytes().to_vec(), 2u64.to_le_bytes().to_vec()]
            .concat()
            .into_iter()
            .chain([1u64.to_le_bytes().to_vec(), b"a".to_vec(), 2u64.to_le_bytes().to_vec(), b"bc".to_vec()].concat())
            .collect();
        let bytes = Writer::default()
            .kv_str("general.architecture", "llama")
            .kv_raw("llama.block_count", 4, &7u32.to_le_bytes())
            .kv_raw("tokenizer.ggml.tokens", 9, &array)
            .tensor("w", &[2, 32], 20, 0)
            .tensor("b", &[3], 0, 64)
            .finish(&[0u8; 76]);
        let header = parsed(&bytes).unwrap();
        assert_eq!(header.metadata["general.architecture"], Value::String("llama".into()));
        assert_eq!(header.metadata["llama.block_count"], Value::U32(7));
        assert_eq!(
            header.metadata["tokenizer.ggml.tokens"],
            Value::Array(vec![Value::String("a".into()), Value::String("bc".into())])
        );
        let w = &header.tensor_infos["w"];
        assert_eq!((w.dims.clone(), w.ggml_type, w.byte_size()), (vec![2, 32], GgmlType::IQ4_NL, 36));
        assert_eq!(header.tensor_infos["b"].byte_size(), 12);
        assert_eq!(header.tensor_data_offset % 32, 0);
    }

    #[test]
    fn hostile_headers_are_refused_without_allocating() {
        let refused = |bytes: Vec<u8>, expected: &str| {
            let err = parsed(&bytes).unwrap_err().to_string();
            assert!(err.contains(expected), "`{err}` should mention `{expected}`");
        };
        refused(b"GGML\x03\0\0\0".to_vec(), "not a GGUF file");
        refused([b"GGUF".as_slice(), &9u32.to_le_bytes()].concat(), "version 9");
        refused(Writer::default().kv_str("k", "v").finish(&[])[..40].to_vec(), "truncated");
        let mut many = Writer::default().finish(&[]);
        many[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
        refused(many, "claims");
        let mut long = Writer::default().kv_str("k", "v").finish(&[]);
        long[24..32].copy_from_slice(&(1u64 << 60).to_le_bytes());
        refused(long, "longer than the rest of the file");
        let huge_array = [8u32.to_le_bytes().as_slice(), &(1u64 << 40).to_le_bytes()].concat();
        refused(Writer::default().kv_raw("a", 9, &huge_array).finish(&[]), "claims 1099511627776 array items");
        let mut nested = Vec::new();
        for _ in 0..3 {
            nested.extend(9u32.to_le_bytes());
            nested.extend(1u64.to_le_bytes());
        }
        refused(Writer::default().kv_raw("a", 9, &nested).finish(&[]), "nested");
        refused(Writer::default().kv_raw("b", 7, &[2]).finish(&[]), "a boolean of value 2");
        refused(Writer::default().kv_raw("x", 99, &[]).finish(&[]), "unknown value type 99");
        refused(Writer::default().kv_str("k", "v").kv_str("k", "w").finish(&[]), "appears twice");
        refused(Writer::default().tensor("t", &[1, 32], 5, 0).finish(&[0; 64]), "unknown GGML type id 5");
        refused(Writer::default().tensor("t", &[1, 2, 3, 4, 5], 0, 0).finish(&[]), "5 dimensions");
        refused(Writer::default().tensor("t", &[3, 16], 2, 0).finish(&[0; 64]), "not whole Q4_0 blocks");
        refused(Writer::default().tensor("t", &[u64::MAX / 2, 4], 0, 0).finish(&[]), "past 2^63");
        refused(Writer::default().tensor("t", &[8], 0, 0).finish(&[0; 16]), "truncated");
        refused(Writer::default().tensor("t", &[8], 0, 8).finish(&[0; 64]), "not a multiple of the alignment");
        refused(Writer::default().tensor("t", &[8], 0, 0).tensor("u", &[8], 0, 0).finish(&[0; 64]), "overlap");
        refused(Writer::default().kv_raw("general.alignment", 4, &3u32.to_le_bytes()).finish(&[]), "power of two");
    }

    #[test]
    fn every_known_type_id_round_trips_and_sizes_are_whole_blocks() {
        let known: Vec<GgmlType> = (0..64).filter_map(GgmlType::from_id).collect();
        assert_eq!(known.len(), 32);
        assert_eq!(GgmlType::from_id(23), Some(GgmlType::IQ4_XS));
        assert_eq!(GgmlType::IQ4_XS.bytes_for(512), Some(272));
        assert_eq!(GgmlType::Q4_K.bytes_for(255), None);
        assert_eq!(GgmlType::Q8_0.name(), "Q8_0");
    }
}
