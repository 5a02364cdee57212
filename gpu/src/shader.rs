//! The WGSL sources of the kernels, assembled from `shaders/`.

use crate::attention::KvPrecision;
use crate::matmul::WeightFormat;
use cake_kernels::ggml_blocks::GgmlFormat;

/// One compiled kernel: a shader and, for products, the weight format it
/// reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Kernel {
    Matmul(WeightFormat),
    RmsNorm,
    Rope,
    Glu,
    Add,
    AddBias,
    KvStore(KvPrecision),
    Attention(KvPrecision),
}

const GRID: &str = include_str!("shaders/grid.wgsl");
const BYTES: &str = include_str!("shaders/bytes.wgsl");

impl Kernel {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::Matmul(_) => "matmul",
            Self::RmsNorm => "rms_norm",
            Self::Rope => "rope",
            Self::Glu => "glu",
            Self::Add => "add",
            Self::AddBias => "add_bias",
            Self::KvStore(_) => "kv_store",
            Self::Attention(_) => "attention",
        }
    }
}

/// Q4_K's and Q5_K's packed scales, which both formats' decoders read.
const K_SCALES: &str = include_str!("shaders/formats/k_scales.wgsl");

/// The WGSL a weight format's `load_unit` needs besides [`BYTES`].
fn format_helpers(format: WeightFormat) -> &'static str {
    match format {
        WeightFormat::Ggml(GgmlFormat::Q4_K | GgmlFormat::Q5_K) => K_SCALES,
        _ => "",
    }
}

/// The WGSL of a weight format's `load_unit`.
fn format_source(format: WeightFormat) -> &'static str {
    match format {
        WeightFormat::F32 => include_str!("shaders/formats/f32.wgsl"),
        WeightFormat::F16 => include_str!("shaders/formats/f16.wgsl"),
        WeightFormat::Bf16 => include_str!("shaders/formats/bf16.wgsl"),
        WeightFormat::Ggml(format) => match format {
            GgmlFormat::Q4_0 => include_str!("shaders/formats/q4_0.wgsl"),
            GgmlFormat::Q4_1 => include_str!("shaders/formats/q4_1.wgsl"),
            GgmlFormat::Q5_0 => include_str!("shaders/formats/q5_0.wgsl"),
            GgmlFormat::Q5_1 => include_str!("shaders/formats/q5_1.wgsl"),
            GgmlFormat::Q8_0 => include_str!("shaders/formats/q8_0.wgsl"),
            GgmlFormat::Q4_K => include_str!("shaders/formats/q4_k.wgsl"),
            GgmlFormat::Q5_K => include_str!("shaders/formats/q5_k.wgsl"),
            GgmlFormat::Q6_K => include_str!("shaders/formats/q6_k.wgsl"),
            GgmlFormat::IQ4_NL => include_str!("shaders/formats/iq4_nl.wgsl"),
            GgmlFormat::IQ4_XS => include_str!("shaders/formats/iq4_xs.wgsl"),
            GgmlFormat::Q3_K => include_str!("shaders/formats/q3_k.wgsl"),
            GgmlFormat::Q2_K => include_str!("shaders/formats/q2_k.wgsl"),
        },
    }
}

/// The whole WGSL module of `kernel`.
pub(crate) fn source(kernel: Kernel) -> String {
    let body = match kernel {
        Kernel::Matmul(format) => {
            let format = [BYTES, format_helpers(format), format_source(format)].join("\n");
            include_str!("shaders/matmul.wgsl").replace("//INCLUDE_FORMAT//", &format)
        }
        Kernel::RmsNorm => include_str!("shaders/rms_norm.wgsl").to_owned(),
        Kernel::Rope => include_str!("shaders/rope.wgsl").to_owned(),
        Kernel::Glu => include_str!("shaders/glu.wgsl").to_owned(),
        Kernel::Add => include_str!("shaders/add.wgsl").to_owned(),
        Kernel::AddBias => include_str!("shaders/add_bias.wgsl").to_owned(),
        Kernel::KvStore(precision) => {
            let write = match precision {
                KvPrecision::F16 => include_str!("shaders/kv_write_f16.wgsl"),
                KvPrecision::F32 => include_str!("shaders/kv_write_f32.wgsl"),
            };
            include_str!("shaders/kv_store.wgsl").replace("//INCLUDE_PRECISION//", write)
        }
        Kernel::Attention(precision) => {
            let read = match precision {
                KvPrecision::F16 => include_str!("shaders/kv_read_f16.wgsl"),
                KvPrecision::F32 => include_str!("shaders/kv_read_f32.wgsl"),
            };
            include_str!("shaders/attention.wgsl").replace("//INCLUDE_PRECISION//", read)
        }
    };
    [GRID, &body].join("\n")
}
