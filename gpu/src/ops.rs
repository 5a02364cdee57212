//! The element-wise and per-row kernels of a transformer block.

use crate::batch::{groups_of_64, Batch};
use crate::buffer::GpuTensor;
use crate::shader::Kernel;
use anyhow::{bail, Result};

/// The gated MLP's activation of the gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    Silu,
    /// GELU, tanh approximation (Gemma).
    GeluTanh,
}

/// How rotary embedding pairs a head's values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RotaryPairs {
    /// Value `i` with `i + rotary / 2` (GPT-NeoX; most families).
    Halves,
    /// Value `2i` with `2i + 1` (GPT-J).
    Adjacent,
}

/// Fails unless every tensor holds at least `len` values.
fn check_len(op: &str, len: usize, tensors: &[&GpuTensor]) -> Result<()> {
    if let Some(short) = tensors.iter().find(|t| t.len() < len) {
        bail!("{op} over {len} values got a GPU tensor of {}", short.len());
    }
    Ok(())
}

impl Batch<'_> {
    /// `y = x / rms(x) · weight` over `rows` rows of `weight.len()` values.
    pub fn rms_norm(&mut self, x: &GpuTensor, weight: &GpuTensor, eps: f32, rows: usize, y: &GpuTensor) -> Result<()> {
        let width = weight.len();
        check_len("RMSNorm", rows * width, &[x, y])?;
        let params = [width as u32, rows as u32, eps.to_bits()];
        self.dispatch(Kernel::RmsNorm, &[&x.buffer, &weight.buffer, &y.buffer], &params, rows as u32, 1);
        Ok(())
    }

    /// Rotary embedding in place over `x` `(tokens, heads, head_dim)`:
    /// the first `rotary` values of each head turn by `table`'s angles,
    /// `(tokens, rotary / 2)` pairs of (cos, sin).
    pub fn rope(
        &mut self,
        x: &GpuTensor,
        table: &GpuTensor,
        (tokens, heads, head_dim): (usize, usize, usize),
        rotary: usize,
        pairs: RotaryPairs,
    ) -> Result<()> {
        if rotary > head_dim || !rotary.is_multiple_of(2) {
            bail!("rotary width {rotary} for heads of {head_dim}");
        }
        check_len("rotary embedding", tokens * heads * head_dim, &[x])?;
        check_len("rotary table", tokens * rotary, &[table])?;
        let neox = u32::from(pairs == RotaryPairs::Halves);
        let params = [tokens as u32, heads as u32, head_dim as u32, rotary as u32, neox];
        let threads = tokens * heads * rotary / 2;
        self.dispatch(Kernel::Rope, &[&x.buffer, &table.buffer], &params, groups_of_64(threads), 1);
        Ok(())
    }

    /// `y = act(gate) · up` over `len` values.
    pub fn glu(
        &mut self,
        gate: &GpuTensor,
        up: &GpuTensor,
        activation: Activation,
        len: usize,
        y: &GpuTensor,
    ) -> Result<()> {
        check_len("gated activation", len, &[gate, up, y])?;
        let kind = match activation {
            Activation::Silu => 0,
            Activation::GeluTanh => 1,
        };
        self.dispatch(Kernel::Glu, &[&gate.buffer, &up.buffer, &y.buffer], &[len as u32, kind], groups_of_64(len), 1);
        Ok(())
    }

    /// `y = a + b` over `len` values.
    pub fn add(&mut self, a: &GpuTensor, b: &GpuTensor, len: usize, y: &GpuTensor) -> Result<()> {
        check_len("add", len, &[a, b, y])?;
        self.dispatch(Kernel::Add, &[&a.buffer, &b.buffer, &y.buffer], &[len as u32], groups_of_64(len), 1);
        Ok(())
    }

    /// `y[i] += bias[i % bias.len()]` over `rows` rows.
    pub fn add_bias(&mut self, y: &GpuTensor, bias: &GpuTensor, rows: usize) -> Result<()> {
        let len = rows * bias.len();
        check_len("bias", len, &[y])?;
        let params = [len as u32, bias.len() as u32];
        self.dispatch(Kernel::AddBias, &[&y.buffer, &bias.buffer], &params, groups_of_64(len), 1);
        Ok(())
    }
}
