//! Which kernel multiplies each weight matrix, by the type it is stored in,
//! counted as a model loads: `cake run --json` and the load log show it, so
//! no stored type takes a slow path unseen.

use super::weights::{MappedFloat, MatrixWeight};
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// Matrices per (stored type, kernel), and whether any is in a GGML type
/// below f32 (quantized, or F16 or BF16 read from the file).
#[derive(Debug, Default)]
pub struct KernelCensus {
    counts: Mutex<BTreeMap<(String, String), usize>>,
    ggml_below_f32: AtomicBool,
}

/// One line of the census.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KernelUse {
    /// The type in the file: `Q4_K`, `F32`, `BF16`, …
    pub stored: String,
    /// What multiplies it: `cake avx2`, `cake avx2 in place`, `cake f32 stream`, `candle`, …
    pub kernel: String,
    pub matrices: usize,
}

impl KernelCensus {
    /// Counts `matrix`, stored in the file as `stored`.
    pub fn record(&self, stored: String, matrix: &MatrixWeight) {
        let (kernel, ggml_below_f32) = match matrix {
            MatrixWeight::Packed(p) => {
                let level = cake_kernels::cpu::Level::detected().name();
                let kernel = if p.is_in_place() { format!("cake {level} in place") } else { format!("cake {level}") };
                (kernel, true)
            }
            MatrixWeight::Mapped(m) => {
                let level = cake_kernels::cpu::Level::detected();
                let bf16_prompts = m.float == MappedFloat::BF16
                    && cake_kernels::dense::rounds_bf16_prompts(level, cake_kernels::dense::TILED_MIN_ROWS);
                let prompts = if bf16_prompts { ", prompts in bf16 pairs" } else { "" };
                (format!("cake {} stream{prompts}", m.float.name().to_lowercase()), m.float != MappedFloat::F32)
            }
            MatrixWeight::Quantized(_) => ("candle ggml".into(), true),
            MatrixWeight::Dense(_) => ("candle dense".into(), false),
            MatrixWeight::Fp8(_) => ("fp8 dequantized per product".into(), false),
        };
        *self.counts.lock().expect("census").entry((stored, kernel)).or_default() += 1;
        if ggml_below_f32 {
            self.ggml_below_f32.store(true, Ordering::Relaxed);
        }
    }

    /// Counts a matrix the GPU multiplies, stored in the file as `stored`
    /// (`from_file_below_f32`: blocks or halves read from a GGUF file).
    pub fn record_gpu(&self, stored: &str, from_file_below_f32: bool) {
        *self.counts.lock().expect("census").entry((stored.to_string(), "gpu wgsl".into())).or_default() += 1;
        if from_file_below_f32 {
            self.ggml_below_f32.store(true, Ordering::Relaxed);
        }
    }

    /// Whether a matrix recorded so far is in a GGML type below f32.
    pub fn any_ggml_below_f32(&self) -> bool {
        self.ggml_below_f32.load(Ordering::Relaxed)
    }

    /// Every (stored type, kernel) with its count, by type.
    pub fn uses(&self) -> Vec<KernelUse> {
        let counts = self.counts.lock().expect("census");
        counts
            .iter()
            .map(|((stored, kernel), &matrices)| KernelUse { stored: stored.clone(), kernel: kernel.clone(), matrices })
            .collect()
    }
}

/// `Q4_K ×96 cake avx2, F32 ×1 cake f32 stream`.
pub fn describe(uses: &[KernelUse]) -> String {
    let parts: Vec<String> = uses.iter().map(|u| format!("{} ×{} {}", u.stored, u.matrices, u.kernel)).collect();
    parts.join(", ")
}
