//! A depthwise convolution over time, centred and zero-padded (each
//! channel filtered by its own kernel): the Zipformer's convolution modules
//! and the vocoder's ConvNeXt blocks both use one.

use crate::models::weights::Weights;
use anyhow::Result;

pub struct DepthwiseConv {
    /// `(kernel, channels)`, row-major: tap `k` of every channel together.
    taps: Vec<f32>,
    bias: Vec<f32>,
    channels: usize,
    kernel: usize,
}

/// Output frames per work item of the pool.
const FRAMES_PER_ITEM: usize = 16;

impl DepthwiseConv {
    /// `{prefix}.weight [channels, 1, kernel]` and `{prefix}.bias`.
    pub fn load(weights: &Weights, prefix: &str, channels: usize, kernel: usize) -> Result<Self> {
        let by_channel: Vec<f32> =
            weights.dense(&format!("{prefix}.weight"), &[channels, 1, kernel])?.flatten_all()?.to_vec1()?;
        let by_channel = &by_channel;
        let taps = (0..kernel).flat_map(|k| (0..channels).map(move |c| by_channel[c * kernel + k])).collect();
        Ok(Self { taps, bias: weights.dense(&format!("{prefix}.bias"), &[channels])?.to_vec1()?, channels, kernel })
    }

    /// `input` is `(frames, channels)` row-major; so is the result:
    /// `out[t][c] = b[c] + Σₖ w[c][k] · in[t + k − kernel/2][c]`, summed in
    /// that order; frames are spread over the kernel pool.
    pub fn forward(&self, input: &[f32]) -> Vec<f32> {
        let (channels, half) = (self.channels, self.kernel / 2);
        let frames = input.len() / channels;
        let mut out = vec![0f32; frames * channels];
        cake_kernels::pool::global().for_each_chunk(&mut out, FRAMES_PER_ITEM * channels, &|item, part| {
            for (r, out_row) in part.chunks_mut(channels).enumerate() {
                let t = item * FRAMES_PER_ITEM + r;
                out_row.copy_from_slice(&self.bias);
                for (k, taps) in self.taps.chunks(channels).enumerate() {
                    let Some(source) = (t + k).checked_sub(half).filter(|&s| s < frames) else { continue };
                    let in_row = &input[source * channels..(source + 1) * channels];
                    for ((o, &v), &w) in out_row.iter_mut().zip(in_row).zip(taps) {
                        *o += w * v;
                    }
                }
            }
        });
        out
    }
}
