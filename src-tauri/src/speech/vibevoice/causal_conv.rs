//! The speech tokenizers' causal convolutions (docs/vibevoice.md §6.1–6.2),
//! each usable on a whole sequence or chunk by chunk with a small cache of
//! past input, with the same result.
//!
//! Tensors are channels-first: `[batch, channels, time]`.

use crate::models::weights::Weights;
use anyhow::Result;
use candle_core::{Tensor, D};

/// The cache of one convolution while streaming (empty at the start).
pub type ConvState = Option<Tensor>;

/// A causal 1-D convolution: zero padding on the left only, so an output
/// step never sees later input.
pub struct CausalConv1d {
    weight: Tensor,
    bias: Tensor,
    kernel: usize,
    stride: usize,
    groups: usize,
}

impl CausalConv1d {
    /// Loads `{prefix}.weight [out, in/groups, kernel]` and `{prefix}.bias`.
    pub fn load(
        weights: &Weights,
        prefix: &str,
        (inputs, outputs): (usize, usize),
        kernel: usize,
        stride: usize,
        groups: usize,
    ) -> Result<Self> {
        Ok(Self {
            weight: weights.dense(&format!("{prefix}.weight"), &[outputs, inputs / groups, kernel])?,
            bias: weights.dense(&format!("{prefix}.bias"), &[outputs])?,
            kernel,
            stride,
            groups,
        })
    }

    /// Input samples the convolution needs from before the current chunk.
    fn context(&self) -> usize {
        self.kernel - self.stride
    }

    fn convolve(&self, padded: &Tensor) -> Result<Tensor> {
        let y = padded.conv1d(&self.weight, 0, self.stride, 1, self.groups)?;
        Ok(y.broadcast_add(&self.bias.reshape((1, (), 1))?)?)
    }

    /// The whole sequence at once (output length `ceil(T / stride)`).
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let length = x.dim(D::Minus1)?;
        let context = self.context();
        let frames = length.div_ceil(self.stride).max(1);
        // Right padding so that the last (partial) stride still yields a frame.
        let right = ((frames - 1) * self.stride + self.kernel).saturating_sub(context + length);
        self.convolve(&x.pad_with_zeros(D::Minus1, context, right)?)
    }

    /// One chunk (its length a multiple of the stride), continuing `state`.
    pub fn forward_stream(&self, x: &Tensor, state: &mut ConvState) -> Result<Tensor> {
        let context = self.context();
        let past = match state.take() {
            Some(past) => past,
            None => Tensor::zeros((x.dim(0)?, x.dim(1)?, context), x.dtype(), x.device())?,
        };
        let input = Tensor::cat(&[&past, x], D::Minus1)?;
        let total = input.dim(D::Minus1)?;
        *state = Some(input.narrow(D::Minus1, total - context, context)?);
        self.convolve(&input)
    }
}

/// A causal transposed convolution (upsampling by `stride`), trimmed on the
/// right so that `T` input frames give exactly `T · stride` samples.
pub struct CausalConvTranspose1d {
    weight: Tensor,
    bias: Tensor,
    kernel: usize,
    stride: usize,
}

impl CausalConvTranspose1d {
    /// Loads `{prefix}.weight [in, out, kernel]` and `{prefix}.bias`.
    pub fn load(
        weights: &Weights,
        prefix: &str,
        (inputs, outputs): (usize, usize),
        kernel: usize,
        stride: usize,
    ) -> Result<Self> {
        Ok(Self {
            weight: weights.dense(&format!("{prefix}.weight"), &[inputs, outputs, kernel])?,
            bias: weights.dense(&format!("{prefix}.bias"), &[outputs])?,
            kernel,
            stride,
        })
    }

    /// Transposed convolution with the trailing `stride` samples dropped.
    fn upsample(&self, x: &Tensor) -> Result<Tensor> {
        let y = x.conv_transpose1d(&self.weight, 0, 0, self.stride, 1, 1)?;
        let y = y.broadcast_add(&self.bias.reshape((1, (), 1))?)?;
        let length = y.dim(D::Minus1)?;
        Ok(y.narrow(D::Minus1, 0, length - self.stride)?)
    }

    /// The whole sequence at once.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.upsample(x)
    }

    /// One chunk, continuing `state` (the last `kernel − 1` input frames).
    pub fn forward_stream(&self, x: &Tensor, state: &mut ConvState) -> Result<Tensor> {
        let new_frames = x.dim(D::Minus1)?;
        let (input, had_past) = match state.take() {
            Some(past) => (Tensor::cat(&[&past, x], D::Minus1)?, true),
            None => (x.clone(), false),
        };
        let total = input.dim(D::Minus1)?;
        let keep = (self.kernel - 1).min(total);
        *state = Some(input.narrow(D::Minus1, total - keep, keep)?);
        let y = self.upsample(&input)?;
        if !had_past {
            return Ok(y);
        }
        let wanted = new_frames * self.stride;
        let length = y.dim(D::Minus1)?;
        Ok(y.narrow(D::Minus1, length - wanted, wanted)?)
    }
}
