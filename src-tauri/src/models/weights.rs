//! Where model tensors come from, and in which form they reach the model.
//!
//! A [`WeightStore`] hands out tensors by their Hugging Face name
//! (`model.layers.3.self_attn.q_proj.weight`), whether they live in a folder of
//! safetensors shards or in a GGUF file. [`Weights`] wraps a store with the
//! load policy (target dtype, keep quantized or dequantize) and checks every
//! tensor's shape against what the config implies, so a checkpoint that
//! disagrees with its `config.json` is an error naming the tensor, not a
//! shape panic deep inside a matmul.

use super::fp8::Fp8Matrix;
use super::kernel_census::KernelCensus;
use crate::formats::gguf::GgmlType;
use anyhow::{bail, Context, Result};
use cake_gpu::matmul::{GpuMatrix, WeightFormat};
use cake_gpu::Gpu;
use cake_kernels::packed::{GgmlFormat, PackedMatrix};
use candle_core::quantized::QTensor;
use candle_core::{DType, Device, Tensor};
use std::sync::Arc;

/// A tensor as stored: plain, or in a GGML quantized block format (as
/// candle holds it, or repacked for Cake's kernels), or an f32 matrix read
/// where it lies in a memory-mapped file.
pub enum StoredTensor {
    Dense(Tensor),
    Quantized(Arc<QTensor>),
    Packed(Arc<PackedMatrix>),
    Mapped(Arc<MappedMatrix>),
}

/// The float type of a mapped matrix's values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MappedFloat {
    F32,
    F16,
    BF16,
}

impl MappedFloat {
    fn size(self) -> usize {
        match self {
            MappedFloat::F32 => 4,
            MappedFloat::F16 | MappedFloat::BF16 => 2,
        }
    }

    /// `F32`, `F16` or `BF16`, as GGUF names the type.
    pub fn name(self) -> &'static str {
        match self {
            MappedFloat::F32 => "F32",
            MappedFloat::F16 => "F16",
            MappedFloat::BF16 => "BF16",
        }
    }
}

/// A mapped matrix's values where they lie.
pub enum MappedValues<'a> {
    F32(&'a [f32]),
    F16(&'a [half::f16]),
    BF16(&'a [half::bf16]),
}

/// An f32, f16 or bf16 `rows × cols` matrix in a memory-mapped file, used in
/// place: no copy at load, and the operating system shares the pages with
/// its file cache (and with other processes that map the same file). The
/// map lives as long as the matrix; files are replaced by renaming a new one
/// into place (downloads, imports), never rewritten, so a mapped file does
/// not change under the model.
pub struct MappedMatrix {
    map: Arc<memmap2::Mmap>,
    start: usize,
    pub rows: usize,
    pub cols: usize,
    pub float: MappedFloat,
}

impl MappedMatrix {
    /// The matrix at byte `start` of `map`, if it lies inside the map and is
    /// aligned for its values (GGUF aligns tensor data to 32 bytes by default).
    pub fn new(map: Arc<memmap2::Mmap>, start: usize, rows: usize, cols: usize, float: MappedFloat) -> Option<Self> {
        let bytes = rows.checked_mul(cols)?.checked_mul(float.size())?;
        let end = start.checked_add(bytes)?;
        let fits = cfg!(target_endian = "little")
            && end <= map.len()
            && (map.as_ptr() as usize + start).is_multiple_of(float.size());
        fits.then_some(Self { map, start, rows, cols, float })
    }

    /// The values, row by row.
    pub fn values(&self) -> MappedValues<'_> {
        let (n, bytes) = (self.rows * self.cols, &self.map[self.start..self.start + self.bytes()]);
        // SAFETY: in bounds and aligned, on a little-endian host like the
        // file's values (checked in `new`); any bit pattern is a value.
        unsafe {
            match self.float {
                MappedFloat::F32 => MappedValues::F32(std::slice::from_raw_parts(bytes.as_ptr() as *const f32, n)),
                MappedFloat::F16 => {
                    MappedValues::F16(std::slice::from_raw_parts(bytes.as_ptr() as *const half::f16, n))
                }
                MappedFloat::BF16 => {
                    MappedValues::BF16(std::slice::from_raw_parts(bytes.as_ptr() as *const half::bf16, n))
                }
            }
        }
    }

    /// A copy as a candle tensor (in its own float type).
    pub fn to_tensor(&self, device: &Device) -> Result<Tensor> {
        let shape = (self.rows, self.cols);
        Ok(match self.values() {
            MappedValues::F32(values) => Tensor::from_slice(values, shape, device)?,
            MappedValues::F16(values) => Tensor::from_slice(values, shape, device)?,
            MappedValues::BF16(values) => Tensor::from_slice(values, shape, device)?,
        })
    }

    /// Row `row`'s values as f32, into `out` (`cols` long).
    pub fn row_into(&self, row: usize, out: &mut [f32]) {
        use half::slice::HalfFloatSliceExt;
        let at = row * self.cols..(row + 1) * self.cols;
        match self.values() {
            MappedValues::F32(values) => out.copy_from_slice(&values[at]),
            MappedValues::F16(values) => values[at].convert_to_f32_slice(out),
            MappedValues::BF16(values) => values[at].convert_to_f32_slice(out),
        }
    }

    pub fn bytes(&self) -> usize {
        self.rows * self.cols * self.float.size()
    }
}

impl StoredTensor {
    /// The type as stored: the GGML type, or the float dtype.
    pub fn type_name(&self) -> String {
        match self {
            Self::Dense(t) => format!("{:?}", t.dtype()).to_uppercase(),
            Self::Quantized(q) => format!("{:?}", q.dtype()).to_uppercase().replace('K', "_K"),
            Self::Packed(p) => p.format.name().to_string(),
            Self::Mapped(m) => m.float.name().to_string(),
        }
    }

    pub fn dims(&self) -> Vec<usize> {
        match self {
            Self::Dense(t) => t.dims().to_vec(),
            Self::Quantized(q) => q.shape().dims().to_vec(),
            Self::Packed(p) => vec![p.rows, p.cols],
            Self::Mapped(m) => vec![m.rows, m.cols],
        }
    }
}

/// The GGML types Cake's own kernels multiply (others go through candle's).
pub fn repackable(ggml_type: GgmlType) -> Option<GgmlFormat> {
    Some(match ggml_type {
        GgmlType::Q4_0 => GgmlFormat::Q4_0,
        GgmlType::Q4_1 => GgmlFormat::Q4_1,
        GgmlType::Q5_0 => GgmlFormat::Q5_0,
        GgmlType::Q5_1 => GgmlFormat::Q5_1,
        GgmlType::Q8_0 => GgmlFormat::Q8_0,
        GgmlType::Q4_K => GgmlFormat::Q4_K,
        GgmlType::Q5_K => GgmlFormat::Q5_K,
        GgmlType::Q6_K => GgmlFormat::Q6_K,
        GgmlType::Q2_K => GgmlFormat::Q2_K,
        GgmlType::Q3_K => GgmlFormat::Q3_K,
        GgmlType::IQ4_NL => GgmlFormat::IQ4_NL,
        GgmlType::IQ4_XS => GgmlFormat::IQ4_XS,
        _ => return None,
    })
}

/// The GPU's format for matrices stored as `ggml_type`, if it reads them.
pub fn gpu_format(ggml_type: GgmlType) -> Option<WeightFormat> {
    Some(match ggml_type {
        GgmlType::F32 => WeightFormat::F32,
        GgmlType::F16 => WeightFormat::F16,
        GgmlType::BF16 => WeightFormat::Bf16,
        other => WeightFormat::Ggml(repackable(other)?),
    })
}

/// `t`'s values as little-endian bytes of its float type (f16 and bf16
/// kept, anything else as f32), with that type.
fn dense_bytes(t: &Tensor) -> Result<(GgmlType, Vec<u8>)> {
    let t = t.flatten_all()?;
    Ok(match t.dtype() {
        DType::F16 => (GgmlType::F16, t.to_vec1::<half::f16>()?.iter().flat_map(|v| v.to_le_bytes()).collect()),
        DType::BF16 => (GgmlType::BF16, t.to_vec1::<half::bf16>()?.iter().flat_map(|v| v.to_le_bytes()).collect()),
        _ => (GgmlType::F32, t.to_dtype(DType::F32)?.to_vec1::<f32>()?.iter().flat_map(|v| v.to_le_bytes()).collect()),
    })
}

/// A source of named tensors.
pub trait WeightStore: Send + Sync {
    /// Where the tensors come from, for error messages.
    fn origin(&self) -> String;
    /// Whether the store holds `name`.
    fn contains(&self, name: &str) -> bool;
    /// The stored shape of `name`, without loading it.
    fn shape(&self, name: &str) -> Option<Vec<usize>>;
    /// Loads `name` in its stored form.
    fn load(&self, name: &str, device: &Device) -> Result<StoredTensor>;

    /// The name the store keeps `name` under (for messages): itself,
    /// unless the store is a renamed view.
    fn stored_name(&self, name: &str) -> String {
        name.to_string()
    }

    /// Calls `f` with matrix `name`'s bytes as the file stores them and
    /// their GGML type, where the store keeps such bytes as the model uses
    /// them (a GGUF tensor that needs no reordering); `None` otherwise. The
    /// GPU reads these blocks as they are.
    fn with_stored_bytes(&self, _name: &str, _f: &mut dyn FnMut(GgmlType, &[u8]) -> Result<()>) -> Option<Result<()>> {
        None
    }
}

impl<T: WeightStore + ?Sized> WeightStore for Box<T> {
    fn origin(&self) -> String {
        (**self).origin()
    }
    fn contains(&self, name: &str) -> bool {
        (**self).contains(name)
    }
    fn shape(&self, name: &str) -> Option<Vec<usize>> {
        (**self).shape(name)
    }
    fn load(&self, name: &str, device: &Device) -> Result<StoredTensor> {
        (**self).load(name, device)
    }
    fn stored_name(&self, name: &str) -> String {
        (**self).stored_name(name)
    }
    fn with_stored_bytes(&self, name: &str, f: &mut dyn FnMut(GgmlType, &[u8]) -> Result<()>) -> Option<Result<()>> {
        (**self).with_stored_bytes(name, f)
    }
}

/// How tensors are converted as they are loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadPolicy {
    /// Dtype of dense tensors and activations.
    pub dtype: DType,
    /// Keep GGML-quantized matrices quantized (false: dequantize them to `dtype`).
    pub keep_quantized: bool,
}

/// A store plus the policy and device every tensor is loaded with.
pub struct Weights {
    store: Box<dyn WeightStore>,
    pub policy: LoadPolicy,
    pub device: Device,
    /// FP8 checkpoints' `weight_block_size` (rows, columns), from config.json.
    pub fp8_block_size: Option<(usize, usize)>,
    /// Which kernel each matrix loaded so far goes to.
    pub census: KernelCensus,
}

/// A weight matrix ready for a matmul.
pub enum MatrixWeight {
    Dense(Tensor),
    Quantized(Arc<QTensor>),
    /// GGML-quantized, repacked for Cake's own kernels (see the `cake_kernels` crate).
    Packed(Arc<PackedMatrix>),
    /// F8E4M3 with scales, dequantized at each use.
    Fp8(Arc<Fp8Matrix>),
    /// f32, read where it lies in a mapped file.
    Mapped(Arc<MappedMatrix>),
}

impl MatrixWeight {
    /// Another handle on the same matrix (a tied LM head).
    pub fn share(&self) -> Self {
        match self {
            Self::Dense(t) => Self::Dense(t.clone()),
            Self::Quantized(q) => Self::Quantized(q.clone()),
            Self::Packed(p) => Self::Packed(p.clone()),
            Self::Fp8(m) => Self::Fp8(m.clone()),
            Self::Mapped(m) => Self::Mapped(m.clone()),
        }
    }

    /// The matrix's values as a dense tensor of `dtype`.
    pub fn dequantize(&self, dtype: DType, device: &Device) -> Result<Tensor> {
        Ok(match self {
            Self::Dense(t) => t.to_dtype(dtype)?,
            Self::Quantized(q) => q.dequantize(device)?.to_dtype(dtype)?,
            Self::Packed(p) => Tensor::from_vec(p.dequantize(), (p.rows, p.cols), device)?.to_dtype(dtype)?,
            Self::Fp8(m) => m.dequantize(dtype)?,
            Self::Mapped(m) => m.to_tensor(device)?.to_dtype(dtype)?,
        })
    }
}

impl Weights {
    pub fn new(store: Box<dyn WeightStore>, policy: LoadPolicy, device: Device) -> Self {
        Self { store, policy, device, fp8_block_size: None, census: KernelCensus::default() }
    }

    pub fn contains(&self, name: &str) -> bool {
        self.store.contains(name)
    }

    fn load_checked(&self, name: &str, expected: &[usize]) -> Result<StoredTensor> {
        let origin = self.store.origin();
        let Some(shape) = self.store.shape(name) else {
            bail!("{origin}: tensor `{}` is missing", self.store.stored_name(name));
        };
        if shape != expected {
            let stored = self.store.stored_name(name);
            bail!("{origin}: tensor `{stored}` has shape {shape:?} but config.json implies {expected:?}");
        }
        self.store.load(name, &self.device)
    }

    /// A dense tensor of shape `expected`, converted to the policy's dtype.
    pub fn dense(&self, name: &str, expected: &[usize]) -> Result<Tensor> {
        let tensor = match self.load_checked(name, expected)? {
            StoredTensor::Dense(t) => t,
            StoredTensor::Quantized(q) => q.dequantize(&self.device)?,
            StoredTensor::Packed(p) => MatrixWeight::Packed(p).dequantize(DType::F32, &self.device)?,
            StoredTensor::Mapped(m) => m.to_tensor(&self.device)?,
        };
        tensor
            .to_dtype(self.policy.dtype)
            .with_context(|| format!("cannot convert `{name}` to {:?}", self.policy.dtype))
    }

    /// A weight matrix of shape `expected`, kept quantized if the policy says so.
    pub fn matrix(&self, name: &str, expected: &[usize]) -> Result<MatrixWeight> {
        let stored = self.load_checked(name, expected)?;
        let stored_type = stored.type_name();
        let matrix = self.matrix_from(name, stored)?;
        self.census.record(stored_type, &matrix);
        Ok(matrix)
    }

    /// Rows `rows` of the `(out, in)` matrix `name` in VRAM, its blocks as
    /// stored (dense tensors in their float type).
    pub fn gpu_matrix(
        &self,
        gpu: &Gpu,
        name: &str,
        (out, cols): (usize, usize),
        rows: std::ops::Range<usize>,
    ) -> Result<GpuMatrix> {
        let origin = self.store.origin();
        let Some(shape) = self.store.shape(name) else {
            bail!("{origin}: tensor `{}` is missing", self.store.stored_name(name));
        };
        if shape != [out, cols] {
            bail!("{origin}: tensor `{}` has shape {shape:?}, not [{out}, {cols}]", self.store.stored_name(name));
        }
        let mut uploaded = None;
        let mut from_file = false;
        let mut upload = |ggml_type: GgmlType, bytes: &[u8]| -> Result<()> {
            let format = gpu_format(ggml_type).with_context(|| {
                format!("{origin}: `{name}` is stored as {ggml_type:?}, which the GPU does not read")
            })?;
            let row_bytes = format.row_bytes(cols)?;
            let part = bytes.get(rows.start * row_bytes..rows.end * row_bytes).context("rows outside the tensor")?;
            uploaded = Some(gpu.upload_matrix(name, format, rows.len(), cols, part)?);
            Ok(())
        };
        match self.store.with_stored_bytes(name, &mut upload) {
            Some(result) => {
                result?;
                from_file = true;
            }
            None => match self.store.load(name, &Device::Cpu)? {
                StoredTensor::Dense(t) if t.dtype() == DType::F8E4M3 => {
                    bail!("`{name}` is stored as FP8, which the GPU does not read")
                }
                StoredTensor::Dense(t) => {
                    let (ggml_type, bytes) = dense_bytes(&t)?;
                    upload(ggml_type, &bytes)?;
                }
                StoredTensor::Mapped(m) => {
                    let t = m.to_tensor(&Device::Cpu)?;
                    let (ggml_type, bytes) = dense_bytes(&t)?;
                    upload(ggml_type, &bytes)?;
                }
                StoredTensor::Quantized(_) | StoredTensor::Packed(_) => {
                    bail!("`{name}`: its stored blocks are not at hand for the GPU")
                }
            },
        }
        let matrix = uploaded.context("the store gave no bytes")?;
        if rows.start == 0 {
            self.census.record_gpu(matrix.format.name(), from_file && matrix.format != WeightFormat::F32);
        }
        Ok(matrix)
    }

    fn matrix_from(&self, name: &str, stored: StoredTensor) -> Result<MatrixWeight> {
        match stored {
            StoredTensor::Quantized(q) if self.policy.keep_quantized => Ok(MatrixWeight::Quantized(q)),
            StoredTensor::Packed(p) if self.policy.keep_quantized => Ok(MatrixWeight::Packed(p)),
            StoredTensor::Packed(p) => {
                Ok(MatrixWeight::Dense(MatrixWeight::Packed(p).dequantize(self.policy.dtype, &self.device)?))
            }
            StoredTensor::Mapped(m) if self.policy.dtype == DType::F32 && self.device.is_cpu() => {
                Ok(MatrixWeight::Mapped(m))
            }
            StoredTensor::Mapped(m) => Ok(MatrixWeight::Dense(m.to_tensor(&self.device)?.to_dtype(self.policy.dtype)?)),
            StoredTensor::Quantized(q) => {
                Ok(MatrixWeight::Dense(q.dequantize(&self.device)?.to_dtype(self.policy.dtype)?))
            }
            StoredTensor::Dense(t) if t.dtype() == DType::F8E4M3 => {
                let scale_name = format!("{}_scale_inv", name);
                if !self.store.contains(&scale_name) {
                    bail!("{}: `{name}` is stored as F8E4M3 without its scales `{scale_name}`", self.store.origin());
                }
                let scale = match self.store.load(&scale_name, &self.device)? {
                    StoredTensor::Dense(s) => s,
                    StoredTensor::Quantized(_) | StoredTensor::Packed(_) | StoredTensor::Mapped(_) => {
                        bail!("{}: `{scale_name}` is not a plain tensor", self.store.origin())
                    }
                };
                let matrix =
                    Fp8Matrix::new(name, t, scale, self.fp8_block_size).with_context(|| self.store.origin())?;
                Ok(MatrixWeight::Fp8(Arc::new(matrix)))
            }
            StoredTensor::Dense(t) => Ok(MatrixWeight::Dense(t.to_dtype(self.policy.dtype)?)),
        }
    }
}
