//! Rotary position embeddings in Hugging Face's half-split layout.
//!
//! Frequencies follow transformers' `rope_init_fn`s (default, linear,
//! llama3); angles are computed per call for the positions in use, so no
//! table sized by the context length is kept.

use crate::models::config::{RopeConfig, RopeScaling};
use anyhow::Result;
use candle_core::{DType, Device, Tensor};

pub struct RotaryEmbedding {
    /// One inverse frequency per rotated pair (`head_dim / 2` of them).
    inv_freq: Vec<f32>,
}

impl RotaryEmbedding {
    pub fn new(rope: &RopeConfig, head_dim: usize) -> Self {
        let base: Vec<f64> = (0..head_dim / 2)
            .map(|i| 1.0 / rope.theta.powf((2 * i) as f64 / head_dim as f64))
            .collect();
        let inv_freq = base
            .into_iter()
            .map(|f| scale_frequency(f, &rope.scaling) as f32)
            .collect();
        Self { inv_freq }
    }

    /// `(cos, sin)`, each `(len, head_dim / 2)`, for positions `start..start + len`.
    pub fn cos_sin(&self, start: usize, len: usize, dtype: DType, device: &Device) -> Result<(Tensor, Tensor)> {
        let half = self.inv_freq.len();
        let mut cos = Vec::with_capacity(len * half);
        let mut sin = Vec::with_capacity(len * half);
        for pos in start..start + len {
            for &f in &self.inv_freq {
                let angle = pos as f32 * f;
                cos.push(angle.cos());
                sin.push(angle.sin());
            }
        }
        let cos = Tensor::from_vec(cos, (len, half), device)?.to_dtype(dtype)?;
        let sin = Tensor::from_vec(sin, (len, half), device)?.to_dtype(dtype)?;
        Ok((cos, sin))
    }

    /// Rotates `x` of shape `(batch, heads, seq, head_dim)` by the given angles.
    pub fn apply(x: &Tensor, cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
        Ok(candle_nn::rotary_emb::rope(&x.contiguous()?, cos, sin)?)
    }
}

fn scale_frequency(freq: f64, scaling: &RopeScaling) -> f64 {
    match *scaling {
        RopeScaling::None => freq,
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
