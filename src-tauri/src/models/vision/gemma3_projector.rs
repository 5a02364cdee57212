//! Gemma 3's multimodal projector: the SigLIP patch grid averaged over
//! square windows down to `mm_tokens_per_image` soft tokens (256 in the
//! released models: 64 × 64 patches, 4 × 4 windows), each RMS-normalised
//! (Gemma's `1 + w` scale) and multiplied into the text model's width.

use super::tensors::Tensors;
use anyhow::{bail, Result};
use candle_core::{Device, Tensor};

pub struct Gemma3Projector {
    /// `(vision hidden, text hidden)`: multiplied on the right.
    projection: Tensor,
    norm: Vec<f32>,
    eps: f64,
    /// Patches per side of the grid, and tokens per side after pooling.
    patches_per_side: usize,
    tokens_per_side: usize,
}

impl Gemma3Projector {
    /// The projector of a checkpoint whose vision grid is
    /// `patches_per_side` square, pooled to `tokens` soft tokens.
    pub fn load(tensors: &Tensors, patches_per_side: usize, tokens: usize, eps: f64) -> Result<Self> {
        let tokens_per_side = (tokens as f64).sqrt().round() as usize;
        if tokens_per_side == 0
            || tokens_per_side * tokens_per_side != tokens
            || !patches_per_side.is_multiple_of(tokens_per_side)
        {
            bail!("{tokens} soft tokens cannot pool a {patches_per_side} × {patches_per_side} patch grid evenly");
        }
        let projection = tensors.load("multi_modal_projector.mm_input_projection_weight")?;
        let norm = tensors.load("multi_modal_projector.mm_soft_emb_norm.weight")?.to_vec1::<f32>()?;
        if projection.dims2()?.0 != norm.len() {
            bail!("the projector's norm has {} values for {:?}", norm.len(), projection.dims());
        }
        Ok(Self { projection, norm, eps, patches_per_side, tokens_per_side })
    }

    /// The width of the soft tokens (the text model's).
    pub fn output_width(&self) -> usize {
        self.projection.dim(1).unwrap_or(0)
    }

    /// The soft tokens of one picture's SigLIP features `(patches, hidden)`:
    /// `(tokens, text hidden)`.
    pub fn forward(&self, features: &Tensor) -> Result<Tensor> {
        let (patches, d) = features.dims2()?;
        let side = self.patches_per_side;
        if patches != side * side || d != self.norm.len() {
            bail!("{patches} × {d} features for a {side} × {side} grid of {} values", self.norm.len());
        }
        let values = features.to_vec2::<f32>()?;
        let window = side / self.tokens_per_side;
        let mut pooled = Vec::with_capacity(self.tokens_per_side * self.tokens_per_side * d);
        for (ty, tx) in (0..self.tokens_per_side).flat_map(|ty| (0..self.tokens_per_side).map(move |tx| (ty, tx))) {
            let mut sum = vec![0f32; d];
            for y in ty * window..(ty + 1) * window {
                for x in tx * window..(tx + 1) * window {
                    sum.iter_mut().zip(&values[y * side + x]).for_each(|(s, v)| *s += v);
                }
            }
            let count = (window * window) as f32;
            let mean: Vec<f32> = sum.iter().map(|s| s / count).collect();
            let rms = (mean.iter().map(|v| v * v).sum::<f32>() / d as f32 + self.eps as f32).sqrt();
            pooled.extend(mean.iter().zip(&self.norm).map(|(v, w)| v / rms * (1.0 + w)));
        }
        let tokens = self.tokens_per_side * self.tokens_per_side;
        Ok(Tensor::from_vec(pooled, (tokens, d), &Device::Cpu)?.matmul(&self.projection)?)
    }
}
