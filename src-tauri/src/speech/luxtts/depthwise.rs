//! A depthwise convolution over time, centred and zero-padded (each
//! channel filtered by its own kernel): the Zipformer's convolution modules
//! and the vocoder's ConvNeXt blocks both use one.

use crate::models::weights::Weights;
use anyhow::Result;

pub struct DepthwiseConv {
    /// `(channels, kernel)`, row-major.
    weights: Vec<f32>,
    bias: Vec<f32>,
    channels: usize,
    kernel: usize,
}

impl DepthwiseConv {
    /// `{prefix}.weight [channels, 1, kernel]` and `{prefix}.bias`.
    pub fn load(weights: &Weights, prefix: &str, channels: usize, kernel: usize) -> Result<Self> {
        Ok(Self {
            weights: weights.dense(&format!("{prefix}.weight"), &[channels, 1, kernel])?.flatten_all()?.to_vec1()?,
            bias: weights.dense(&format!("{prefix}.bias"), &[channels])?.to_vec1()?,
            channels,
            kernel,
        })
    }

    /// `input` is `(frames, channels)` row-major; so is the result:
    /// `out[t][c] = b[c] + Σₖ w[c][k] · in[t + k − kernel/2][c]`.
    pub fn forward(&self, input: &[f32]) -> Vec<f32> {
        let (channels, half) = (self.channels, self.kernel / 2);
        let frames = input.len() / channels;
        let mut out = Vec::with_capacity(frames * channels);
        for _ in 0..frames {
            out.extend_from_slice(&self.bias);
        }
        for (t, out_row) in out.chunks_mut(channels).enumerate() {
            for k in 0..self.kernel {
                let Some(source) = (t + k).checked_sub(half).filter(|&s| s < frames) else { continue };
                let in_row = &input[source * channels..(source + 1) * channels];
                for ((o, &v), c) in out_row.iter_mut().zip(in_row).zip(0..channels) {
                    *o += self.weights[c * self.kernel + k] * v;
                }
            }
        }
        out
    }
}
