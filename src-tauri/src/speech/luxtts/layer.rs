//! One Zipformer layer (docs/luxtts-research.md §3): three feed-forward modules,
//! two value attentions and a non-linear attention sharing one set of
//! attention weights, two convolution modules, a BiasNorm, and learned
//! per-channel bypasses back to the layer's input.

use super::activations::{gated_product, swoosh_l, swoosh_r};
use super::attention::{AttentionWeights, NonlinAttention, PaddingMask, SelfAttention};
use super::config::ZipformerShape;
use super::depthwise::DepthwiseConv;
use crate::models::nn::linear::Linear;
use crate::models::weights::Weights;
use anyhow::Result;
use cake_kernels::elementwise::Gate;
use candle_core::{Tensor, D};

/// `in → SwooshL → out`.
struct FeedForward {
    in_proj: Linear,
    out_proj: Linear,
}

impl FeedForward {
    fn load(weights: &Weights, prefix: &str, dim: usize, hidden: usize) -> Result<Self> {
        Ok(Self {
            in_proj: Linear::load(weights, &format!("{prefix}.in_proj"), dim, hidden, true)?,
            out_proj: Linear::load(weights, &format!("{prefix}.out_proj"), hidden, dim, true)?,
        })
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.out_proj.forward(&swoosh_l(&self.in_proj.forward(x)?)?)
    }
}

/// A gated linear unit, a depthwise convolution over time (padded frames
/// zeroed first), SwooshR and a projection.
struct Convolution {
    in_proj: Linear,
    depthwise: DepthwiseConv,
    out_proj: Linear,
    dim: usize,
}

impl Convolution {
    fn load(weights: &Weights, prefix: &str, dim: usize, kernel: usize) -> Result<Self> {
        Ok(Self {
            in_proj: Linear::load(weights, &format!("{prefix}.in_proj"), dim, 2 * dim, true)?,
            depthwise: DepthwiseConv::load(weights, &format!("{prefix}.depthwise_conv"), dim, kernel)?,
            out_proj: Linear::load(weights, &format!("{prefix}.out_proj"), dim, dim, true)?,
            dim,
        })
    }

    fn forward(&self, x: &Tensor, mask: Option<&PaddingMask>) -> Result<Tensor> {
        let projected = self.in_proj.forward(x)?;
        let (values, gate) =
            (projected.narrow(D::Minus1, 0, self.dim)?, projected.narrow(D::Minus1, self.dim, self.dim)?);
        let gated = gated_product(&values, &gate, Gate::Sigmoid)?;
        let frames = gated.dim(0)?;
        let mut input = gated.flatten_all()?.to_vec1::<f32>()?;
        if let Some(mask) = mask {
            for (row, _) in input.chunks_mut(self.dim).zip(&mask.0).filter(|(_, &padded)| padded) {
                row.fill(0.0);
            }
        }
        let convolved = Tensor::from_vec(self.depthwise.forward(&input), (frames, self.dim), x.device())?;
        self.out_proj.forward(&swoosh_r(&convolved)?)
    }
}

/// `x · rms(x − bias)⁻¹ · e^log_scale` over channels: the bias only shifts
/// what the scale is measured from.
struct BiasNorm {
    bias: Tensor,
    scale: f64,
}

impl BiasNorm {
    fn load(weights: &Weights, prefix: &str, dim: usize) -> Result<Self> {
        let log_scale = weights.dense(&format!("{prefix}.log_scale"), &[])?.to_scalar::<f32>()?;
        Ok(Self { bias: weights.dense(&format!("{prefix}.bias"), &[dim])?, scale: (log_scale as f64).exp() })
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let mean_square = x.broadcast_sub(&self.bias)?.sqr()?.mean_keepdim(D::Minus1)?;
        Ok(x.broadcast_mul(&(mean_square.sqrt()?.recip()? * self.scale)?)?)
    }
}

/// `original + (x − original) · scale`, per channel.
pub struct Bypass(Tensor);

impl Bypass {
    pub fn load(weights: &Weights, name: &str, dim: usize) -> Result<Self> {
        Ok(Self(weights.dense(name, &[dim])?))
    }

    pub fn forward(&self, original: &Tensor, x: &Tensor) -> Result<Tensor> {
        Ok((original + (x - original)?.broadcast_mul(&self.0)?)?)
    }
}

pub struct EncoderLayer {
    attention_weights: AttentionWeights,
    self_attn1: SelfAttention,
    self_attn2: SelfAttention,
    feed_forward1: FeedForward,
    feed_forward2: FeedForward,
    feed_forward3: FeedForward,
    nonlin_attention: NonlinAttention,
    conv_module1: Convolution,
    conv_module2: Convolution,
    norm: BiasNorm,
    bypass_mid: Bypass,
    bypass: Bypass,
}

impl EncoderLayer {
    pub fn load(weights: &Weights, prefix: &str, shape: &ZipformerShape, kernel: usize) -> Result<Self> {
        let (dim, ff) = (shape.dim, shape.feedforward);
        let at = |name: &str| format!("{prefix}.{name}");
        let attention = |name: &str| SelfAttention::load(weights, &at(name), dim, shape.heads, shape.value_head_dim);
        Ok(Self {
            attention_weights: AttentionWeights::load(
                weights,
                &at("self_attn_weights"),
                dim,
                shape.heads,
                shape.query_head_dim,
                shape.pos_head_dim,
                shape.pos_dim,
            )?,
            self_attn1: attention("self_attn1")?,
            self_attn2: attention("self_attn2")?,
            feed_forward1: FeedForward::load(weights, &at("feed_forward1"), dim, ff * 3 / 4)?,
            feed_forward2: FeedForward::load(weights, &at("feed_forward2"), dim, ff)?,
            feed_forward3: FeedForward::load(weights, &at("feed_forward3"), dim, ff * 5 / 4)?,
            nonlin_attention: NonlinAttention::load(weights, &at("nonlin_attention"), dim)?,
            conv_module1: Convolution::load(weights, &at("conv_module1"), dim, kernel)?,
            conv_module2: Convolution::load(weights, &at("conv_module2"), dim, kernel)?,
            norm: BiasNorm::load(weights, &at("norm"), dim)?,
            bypass_mid: Bypass::load(weights, &at("bypass_mid.bypass_scale"), dim)?,
            bypass: Bypass::load(weights, &at("bypass.bypass_scale"), dim)?,
        })
    }

    /// `x (n, dim)`; `time (dim)` is added before the feed-forward and
    /// convolution parts (the decoder's), after the attention weights.
    pub fn forward(
        &self,
        x: &Tensor,
        positions: &Tensor,
        time: Option<&Tensor>,
        mask: Option<&PaddingMask>,
    ) -> Result<Tensor> {
        let original = x;
        let weights = self.attention_weights.forward(x, positions, mask)?;
        let with_time = |x: Tensor| -> Result<Tensor> {
            Ok(match time {
                Some(time) => x.broadcast_add(time)?,
                None => x,
            })
        };
        let mut x = with_time(x.clone())?;
        x = (&x + self.feed_forward1.forward(&x)?)?;
        x = (&x + self.nonlin_attention.forward(&x, &weights.get(0)?)?)?;
        x = (&x + self.self_attn1.forward(&x, &weights)?)?;
        x = with_time(x)?;
        x = (&x + self.conv_module1.forward(&x, mask)?)?;
        x = (&x + self.feed_forward2.forward(&x)?)?;
        x = self.bypass_mid.forward(original, &x)?;
        x = (&x + self.self_attn2.forward(&x, &weights)?)?;
        x = with_time(x)?;
        x = (&x + self.conv_module2.forward(&x, mask)?)?;
        x = (&x + self.feed_forward3.forward(&x)?)?;
        x = self.norm.forward(&x)?;
        self.bypass.forward(original, &x)
    }
}
