//! The speech tokenizers' causal convolutions (docs/vibevoice.md §6.1–6.2),
//! each usable on a whole sequence or chunk by chunk with a small cache of
//! past input, with the same result.
//!
//! Tensors are channels-first: `[batch, channels, time]`.

use crate::models::nn::linear::Linear;
use crate::models::weights::{MatrixWeight, Weights};
use anyhow::Result;
use candle_core::{DType, Tensor, D};

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
        let channels = padded.dim(1)?;
        if self.groups > 1 && self.groups == channels && self.stride == 1 && padded.dtype() == DType::F32 {
            return self.depthwise(padded);
        }
        let y = padded.conv1d(&self.weight, 0, self.stride, 1, self.groups)?;
        Ok(y.broadcast_add(&self.bias.reshape((1, (), 1))?)?)
    }

    /// A depthwise convolution (one filter per channel, stride 1), computed
    /// directly: candle runs a grouped convolution as one convolution per
    /// group, thousands of tiny calls for the decoder's widest stages.
    fn depthwise(&self, padded: &Tensor) -> Result<Tensor> {
        let (batch, channels, length) = padded.dims3()?;
        let kernel = self.kernel;
        let outputs = (length + 1).saturating_sub(kernel);
        let input = padded.contiguous()?.flatten_all()?.to_vec1::<f32>()?;
        let weight = self.weight.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()?;
        let bias = self.bias.to_dtype(DType::F32)?.to_vec1::<f32>()?;
        let mut output = vec![0f32; batch * channels * outputs];
        let rows = input.chunks_exact(length).zip(output.chunks_exact_mut(outputs.max(1)));
        for (row, (x, y)) in rows.enumerate() {
            let channel = row % channels;
            let taps = &weight[channel * kernel..(channel + 1) * kernel];
            for (t, out) in y.iter_mut().enumerate() {
                let window = &x[t..t + kernel];
                *out = bias[channel] + window.iter().zip(taps).map(|(a, b)| a * b).sum::<f32>();
            }
        }
        Ok(Tensor::from_vec(output, (batch, channels, outputs), padded.device())?)
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
///
/// Computed as one product and an overlap-add: each input frame times the
/// weight gives every output channel's `kernel` taps, which land `stride`
/// samples after the previous frame's.
pub struct CausalConvTranspose1d {
    /// The weight `[in, out, kernel]` as a projection from an input frame's
    /// channels to `(output channel, tap)`.
    taps: Linear,
    bias: Vec<f32>,
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
        let weight = weights.dense(&format!("{prefix}.weight"), &[inputs, outputs, kernel])?;
        let by_tap = weight.permute((1, 2, 0))?.contiguous()?.reshape((outputs * kernel, inputs))?;
        Ok(Self {
            taps: Linear::from_matrix(MatrixWeight::Dense(by_tap))?,
            bias: weights.dense(&format!("{prefix}.bias"), &[outputs])?.to_dtype(DType::F32)?.to_vec1()?,
            kernel,
            stride,
        })
    }

    /// Transposed convolution with the trailing `stride` samples dropped.
    fn upsample(&self, x: &Tensor) -> Result<Tensor> {
        let (batch, _, frames) = x.dims3()?;
        let (kernel, stride, outputs) = (self.kernel, self.stride, self.bias.len());
        let taps = self.taps.forward(&x.to_dtype(DType::F32)?.transpose(1, 2)?)?;
        let taps = taps.flatten_all()?.to_vec1::<f32>()?;
        let length = (frames - 1) * stride + kernel;
        let kept = length - stride;
        let mut y = vec![0f32; batch * outputs * kept];
        for (b, frame_taps) in taps.chunks_exact(frames * outputs * kernel).enumerate() {
            for (channel, bias) in self.bias.iter().enumerate() {
                let row = &mut y[(b * outputs + channel) * kept..][..kept];
                let mut full = vec![*bias; length];
                for frame in 0..frames {
                    let from = &frame_taps[(frame * outputs + channel) * kernel..][..kernel];
                    for (out, tap) in full[frame * stride..][..kernel].iter_mut().zip(from) {
                        *out += tap;
                    }
                }
                row.copy_from_slice(&full[..kept]);
            }
        }
        Ok(Tensor::from_vec(y, (batch, outputs, kept), x.device())?.to_dtype(x.dtype())?)
    }

    /// The whole sequence at once.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.upsample(x)
    }

    /// One chunk, continuing `state`: the last input frames whose outputs
    /// overlap the next frame's (`ceil(kernel / stride) − 1` of them; older
    /// ones reach no output still to come).
    pub fn forward_stream(&self, x: &Tensor, state: &mut ConvState) -> Result<Tensor> {
        let new_frames = x.dim(D::Minus1)?;
        let (input, had_past) = match state.take() {
            Some(past) => (Tensor::cat(&[&past, x], D::Minus1)?, true),
            None => (x.clone(), false),
        };
        let total = input.dim(D::Minus1)?;
        let keep = (self.kernel.div_ceil(self.stride) - 1).min(total);
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
