//! Rotary position embeddings in Hugging Face's half-split layout.
//!
//! Frequencies follow transformers' `rope_init_fn`s (default, linear,
//! llama3, longrope), over all of a head or its first part; angles are computed per call for the positions in use, so no
//! table sized by the context length is kept.

use crate::models::config::{RopeConfig, RopeScaling};
use anyhow::{bail, Result};
use candle_core::{DType, Device, Tensor, D};

pub struct RotaryEmbedding {
    /// One inverse frequency per rotated pair (`rotary_dim / 2` of them).
    inv_freq: Vec<f32>,
    /// LongRoPE's frequencies for sequences longer than `.1` positions.
    long_inv_freq: Option<(Vec<f32>, usize)>,
    /// cos and sin are multiplied by this (LongRoPE's attention factor).
    magnitude: f32,
    /// How many leading dimensions of a head rotate.
    rotary_dim: usize,
}

impl RotaryEmbedding {
    pub fn new(rope: &RopeConfig, head_dim: usize) -> Result<Self> {
        // transformers truncates: int(head_dim * partial_rotary_factor).
        let rotary_dim = (head_dim as f64 * rope.partial_rotary_factor) as usize;
        if rotary_dim == 0 || !rotary_dim.is_multiple_of(2) || rotary_dim > head_dim {
            bail!("config: {rotary_dim} rotary dimensions of a {head_dim}-wide head (partial_rotary_factor {}) cannot rotate in pairs", rope.partial_rotary_factor);
        }
        let base: Vec<f64> =
            (0..rotary_dim / 2).map(|i| 1.0 / rope.theta.powf((2 * i) as f64 / rotary_dim as f64)).collect();
        if let RopeScaling::LongRope { short_factor, long_factor, original_max_position_embeddings, attention_factor } =
            &rope.scaling
        {
            let divided = |factors: &[f64], which: &str| -> Result<Vec<f32>> {
                if factors.len() != base.len() {
                    bail!(
                        "config: longrope `{which}` has {} entries for {} rotary frequencies",
                        factors.len(),
                        base.len()
                    );
                }
                Ok(base.iter().zip(factors).map(|(f, d)| (f / d) as f32).collect())
            };
            return Ok(Self {
                inv_freq: divided(short_factor, "short_factor")?,
                long_inv_freq: Some((divided(long_factor, "long_factor")?, *original_max_position_embeddings)),
                magnitude: *attention_factor as f32,
                rotary_dim,
            });
        }
        let inv_freq = base.into_iter().map(|f| scale_frequency(f, &rope.scaling) as f32).collect();
        Ok(Self { inv_freq, long_inv_freq: None, magnitude: 1.0, rotary_dim })
    }

    /// `(cos, sin)`, each `(len, rotary_dim / 2)`, for positions `start..start + len`.
    pub fn cos_sin(&self, start: usize, len: usize, dtype: DType, device: &Device) -> Result<(Tensor, Tensor)> {
        // LongRoPE switches to its long frequencies once the sequence is longer
        // than the pretraining context (as transformers decides per forward pass).
        let inv_freq = match &self.long_inv_freq {
            Some((long, original)) if start + len > *original => long,
            _ => &self.inv_freq,
        };
        let half = inv_freq.len();
        let mut cos = Vec::with_capacity(len * half);
        let mut sin = Vec::with_capacity(len * half);
        for pos in start..start + len {
            for &f in inv_freq {
                let angle = pos as f32 * f;
                cos.push(angle.cos() * self.magnitude);
                sin.push(angle.sin() * self.magnitude);
            }
        }
        let cos = Tensor::from_vec(cos, (len, half), device)?.to_dtype(dtype)?;
        let sin = Tensor::from_vec(sin, (len, half), device)?.to_dtype(dtype)?;
        Ok((cos, sin))
    }

    /// Rotates the first `rotary_dim` dimensions of `x` of shape
    /// `(batch, heads, seq, head_dim)` by the given angles.
    pub fn apply(&self, x: &Tensor, cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
        let head_dim = x.dim(D::Minus1)?;
        if self.rotary_dim == head_dim {
            return Ok(candle_nn::rotary_emb::rope(&x.contiguous()?, cos, sin)?);
        }
        let rotated = candle_nn::rotary_emb::rope(&x.narrow(D::Minus1, 0, self.rotary_dim)?.contiguous()?, cos, sin)?;
        let passed = x.narrow(D::Minus1, self.rotary_dim, head_dim - self.rotary_dim)?;
        Ok(Tensor::cat(&[rotated, passed], D::Minus1)?)
    }
}

fn scale_frequency(freq: f64, scaling: &RopeScaling) -> f64 {
    match *scaling {
        RopeScaling::None | RopeScaling::LongRope { .. } => freq,
        RopeScaling::Linear { factor } => freq / factor,
        RopeScaling::Llama3 {
            factor,
            low_freq_factor,
            high_freq_factor,
            original_max_position_embeddings: context,
        } => {
            let wavelen = 2.0 * std::f64::consts::PI / freq;
            let low_freq_wavelen = context / low_freq_factor;
            let high_freq_wavelen = context / high_freq_factor;
            if wavelen > low_freq_wavelen {
                freq / factor
            } else if wavelen < high_freq_wavelen {
                freq
            } else {
                let smooth = (context / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
                (1.0 - smooth) * freq / factor + smooth * freq
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llama3_scaling_keeps_high_and_divides_low_frequencies() {
        let scaling = RopeScaling::Llama3 {
            factor: 8.0,
            low_freq_factor: 1.0,
            high_freq_factor: 4.0,
            original_max_position_embeddings: 8192.0,
        };
        assert_eq!(scale_frequency(1.0, &scaling), 1.0);
        let low = 2.0 * std::f64::consts::PI / 100_000.0;
        assert!((scale_frequency(low, &scaling) - low / 8.0).abs() < 1e-15);
    }
}
