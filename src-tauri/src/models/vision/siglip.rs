//! SigLIP's vision transformer: the picture cut into square patches, each
//! projected to a vector (the patch "convolution" is one matrix product per
//! patch) plus a learned position, then pre-norm encoder layers
//! (LayerNorm, multi-head attention over all patches, LayerNorm, a GELU-tanh
//! MLP, biases everywhere) and a final LayerNorm. Computed in f32.

use super::tensors::Tensors;
use anyhow::{bail, Result};
use candle_core::{Device, Tensor};
use serde::Deserialize;

/// The vision part of a checkpoint's config.json (`vision_config`).
#[derive(Debug, Clone, Deserialize)]
pub struct SiglipConfig {
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub image_size: usize,
    pub patch_size: usize,
    #[serde(default = "default_eps")]
    pub layer_norm_eps: f64,
}

fn default_eps() -> f64 {
    1e-6
}

impl SiglipConfig {
    /// Patches along each side of the (square) picture.
    pub fn patches_per_side(&self) -> usize {
        self.image_size / self.patch_size
    }
}

/// A matrix with its bias: `y = x Wᵀ + b`.
struct Affine {
    weight: Tensor,
    bias: Tensor,
}

impl Affine {
    fn load(tensors: &Tensors, prefix: &str) -> Result<Self> {
        Ok(Self { weight: tensors.load(&format!("{prefix}.weight"))?, bias: tensors.load(&format!("{prefix}.bias"))? })
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Ok(x.matmul(&self.weight.t()?)?.broadcast_add(&self.bias)?)
    }
}

struct LayerNorm {
    weight: Tensor,
    bias: Tensor,
    eps: f32,
}

impl LayerNorm {
    fn load(tensors: &Tensors, prefix: &str, eps: f64) -> Result<Self> {
        Ok(Self {
            weight: tensors.load(&format!("{prefix}.weight"))?,
            bias: tensors.load(&format!("{prefix}.bias"))?,
            eps: eps as f32,
        })
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Ok(candle_nn::ops::layer_norm(x, &self.weight, &self.bias, self.eps)?)
    }
}

struct EncoderLayer {
    norm1: LayerNorm,
    q: Affine,
    k: Affine,
    v: Affine,
    out: Affine,
    norm2: LayerNorm,
    fc1: Affine,
    fc2: Affine,
}

/// The loaded encoder.
pub struct SiglipVision {
    config: SiglipConfig,
    /// `(hidden, 3 · patch²)`: the patch convolution as a matrix.
    patch: Affine,
    /// `(patches, hidden)`.
    positions: Tensor,
    layers: Vec<EncoderLayer>,
    post_norm: LayerNorm,
}

impl SiglipVision {
    /// The encoder under `prefix` (e.g. `vision_tower.vision_model`).
    pub fn load(config: SiglipConfig, tensors: &Tensors, prefix: &str) -> Result<Self> {
        let (d, p) = (config.hidden_size, config.patch_size);
        if config.num_attention_heads == 0 || !d.is_multiple_of(config.num_attention_heads) || p == 0 {
            bail!("the vision config has {d} dimensions over {} heads and patches of {p}", config.num_attention_heads);
        }
        let conv = tensors.load(&format!("{prefix}.embeddings.patch_embedding.weight"))?;
        if conv.dims() != [d, 3, p, p] {
            bail!("the patch embedding has shape {:?}, not [{d}, 3, {p}, {p}]", conv.dims());
        }
        let patch = Affine {
            weight: conv.reshape((d, 3 * p * p))?,
            bias: tensors.load(&format!("{prefix}.embeddings.patch_embedding.bias"))?,
        };
        let positions = tensors.load(&format!("{prefix}.embeddings.position_embedding.weight"))?;
        let eps = config.layer_norm_eps;
        let layers = (0..config.num_hidden_layers)
            .map(|i| {
                let l = format!("{prefix}.encoder.layers.{i}");
                Ok(EncoderLayer {
                    norm1: LayerNorm::load(tensors, &format!("{l}.layer_norm1"), eps)?,
                    q: Affine::load(tensors, &format!("{l}.self_attn.q_proj"))?,
                    k: Affine::load(tensors, &format!("{l}.self_attn.k_proj"))?,
                    v: Affine::load(tensors, &format!("{l}.self_attn.v_proj"))?,
                    out: Affine::load(tensors, &format!("{l}.self_attn.out_proj"))?,
                    norm2: LayerNorm::load(tensors, &format!("{l}.layer_norm2"), eps)?,
                    fc1: Affine::load(tensors, &format!("{l}.mlp.fc1"))?,
                    fc2: Affine::load(tensors, &format!("{l}.mlp.fc2"))?,
                })
            })
            .collect::<Result<_>>()?;
        let post_norm = LayerNorm::load(tensors, &format!("{prefix}.post_layernorm"), eps)?;
        Ok(Self { config, patch, positions, layers, post_norm })
    }

    pub fn config(&self) -> &SiglipConfig {
        &self.config
    }

    /// The features of one picture's `pixel_values` (`3 × size × size`,
    /// channels first): `(patches, hidden)`, patches row by row.
    pub fn forward(&self, pixel_values: &[f32]) -> Result<Tensor> {
        let (size, p) = (self.config.image_size, self.config.patch_size);
        let side = self.config.patches_per_side();
        if pixel_values.len() != 3 * size * size {
            bail!("{} pixel values for a 3 × {size} × {size} picture", pixel_values.len());
        }
        // Each patch's values in the convolution's order: channel, row, column.
        let mut patches = Vec::with_capacity(side * side * 3 * p * p);
        for (py, px) in (0..side).flat_map(|py| (0..side).map(move |px| (py, px))) {
            for c in 0..3 {
                for y in 0..p {
                    let start = c * size * size + (py * p + y) * size + px * p;
                    patches.extend_from_slice(&pixel_values[start..start + p]);
                }
            }
        }
        let patches = Tensor::from_vec(patches, (side * side, 3 * p * p), &Device::Cpu)?;
        let mut x = self.patch.forward(&patches)?.add(&self.positions)?;
        for layer in &self.layers {
            x = self.layer(layer, &x)?;
        }
        self.post_norm.forward(&x)
    }

    fn layer(&self, layer: &EncoderLayer, x: &Tensor) -> Result<Tensor> {
        let (n, d) = x.dims2()?;
        let heads = self.config.num_attention_heads;
        let head_dim = d / heads;
        let normed = layer.norm1.forward(x)?;
        let split =
            |t: Tensor| -> Result<Tensor> { Ok(t.reshape((n, heads, head_dim))?.transpose(0, 1)?.contiguous()?) };
        let q = split(layer.q.forward(&normed)?)?;
        let k = split(layer.k.forward(&normed)?)?;
        let v = split(layer.v.forward(&normed)?)?;
        let scores = (q.matmul(&k.t()?)? * (head_dim as f64).powf(-0.5))?;
        let weights = candle_nn::ops::softmax_last_dim(&scores)?;
        let attended = weights.matmul(&v)?.transpose(0, 1)?.reshape((n, d))?;
        let x = x.add(&layer.out.forward(&attended)?)?;
        let hidden = layer.fc1.forward(&layer.norm2.forward(&x)?)?.gelu()?;
        Ok(x.add(&layer.fc2.forward(&hidden)?)?)
    }
}
