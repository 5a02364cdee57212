//! The decoder-only transformer every supported family runs on.
//!
//! `embed → layers (pre-norm attention + pre-norm gated MLP, residuals) →
//! final norm → LM head`. A [`Decoder`] may hold only a range of layers (a
//! cluster stage): then it has the embedding only if it is the first stage
//! and the head only if it is the last, and hidden states travel between
//! stages through [`Decoder::forward_layers`].

use super::config::{ModelConfig, NormPlacement};
use super::nn::attention::Attention;
use super::nn::kv_cache::{KvCache, LayerCache};
use super::nn::linear::Linear;
use super::nn::mlp::GatedMlp;
use super::nn::norm::RmsNorm;
use super::sources::selection::TensorSelection;
use super::weights::{MatrixWeight, Weights};
use anyhow::{bail, Context, Result};
use candle_core::quantized::QTensor;
use candle_core::{DType, Device, Tensor};
use std::sync::Arc;

/// One transformer block. Pre-norm blocks normalise each sub-layer's input
/// (`input_layernorm`, `post_attention_layernorm`); post-norm blocks (OLMo 2)
/// normalise each sub-layer's output (`post_attention_layernorm`,
/// `post_feedforward_layernorm`) before the residual add.
struct DecoderLayer {
    placement: NormPlacement,
    /// Pre-norm: before attention. Post-norm: after attention.
    attention_norm: RmsNorm,
    self_attn: Attention,
    /// Pre-norm: before the MLP. Post-norm: after the MLP.
    mlp_norm: RmsNorm,
    mlp: GatedMlp,
}

impl DecoderLayer {
    fn load(weights: &Weights, cfg: &ModelConfig, index: usize) -> Result<Self> {
        let prefix = format!("model.layers.{index}");
        let (h, eps) = (cfg.hidden_size, cfg.rms_norm_eps);
        let norm = |name: &str| RmsNorm::load(weights, &format!("{prefix}.{name}.weight"), h, eps);
        let (attention_norm, mlp_norm) = match cfg.norm_placement {
            NormPlacement::Pre => (norm("input_layernorm")?, norm("post_attention_layernorm")?),
            NormPlacement::Post => (norm("post_attention_layernorm")?, norm("post_feedforward_layernorm")?),
        };
        Ok(Self {
            placement: cfg.norm_placement,
            attention_norm,
            self_attn: Attention::load(weights, &format!("{prefix}.self_attn"), cfg, &cfg.layers[index])?,
            mlp_norm,
            mlp: GatedMlp::load(weights, &format!("{prefix}.mlp"), cfg)?,
        })
    }

    fn forward(&self, x: &Tensor, cache: &mut LayerCache) -> Result<Tensor> {
        Ok(match self.placement {
            NormPlacement::Pre => {
                let x = (x + self.self_attn.forward(&self.attention_norm.forward(x)?, cache)?)?;
                let mlp = self.mlp.forward(&self.mlp_norm.forward(&x)?)?;
                (x + mlp)?
            }
            NormPlacement::Post => {
                let x = (x + self.attention_norm.forward(&self.self_attn.forward(x, cache)?)?)?;
                let mlp = self.mlp_norm.forward(&self.mlp.forward(&x)?)?;
                (x + mlp)?
            }
        })
    }
}

/// Token embedding table, dense or quantized.
enum Embedding {
    Dense(Tensor),
    Quantized(Arc<QTensor>),
}

impl Embedding {
    fn lookup(&self, ids: &Tensor) -> Result<Tensor> {
        Ok(match self {
            Self::Dense(table) => table.index_select(ids, 0)?,
            Self::Quantized(q) => q.embedding(ids)?,
        })
    }
}

/// Which positions the LM head is applied to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogitsFor {
    /// Only the last position (generation).
    Last,
    /// Every position (perplexity).
    All,
}

/// A loaded decoder, whole or one contiguous stage of it.
pub struct Decoder {
    pub config: ModelConfig,
    pub selection: TensorSelection,
    embed_tokens: Option<Embedding>,
    layers: Vec<DecoderLayer>,
    norm: Option<RmsNorm>,
    lm_head: Option<Linear>,
    dtype: DType,
    device: Device,
}

impl Decoder {
    /// Loads the tensors `selection` names and checks their shapes against
    /// `config`, calling `on_layer(done, total)` as layers arrive.
    pub fn load(
        config: ModelConfig,
        weights: &Weights,
        selection: TensorSelection,
        on_layer: &mut dyn FnMut(usize, usize),
    ) -> Result<Self> {
        let n = config.num_hidden_layers();
        if selection.layers.end > n || selection.layers.start > selection.layers.end {
            bail!("layer range {:?} is outside the model's {n} layers", selection.layers);
        }
        let (vocab, hidden) = (config.vocab_size, config.hidden_size);
        let embed_name = "model.embed_tokens.weight";
        let needs_table = selection.embedding || (selection.head && config.tie_word_embeddings);
        let table = if needs_table {
            Some(weights.matrix(embed_name, &[vocab, hidden])?)
        } else {
            None
        };
        let lm_head = if !selection.head {
            None
        } else if config.tie_word_embeddings || !weights.contains("lm_head.weight") {
            let shared = match table.as_ref().context("tied LM head needs the embedding")? {
                MatrixWeight::Dense(t) => MatrixWeight::Dense(t.clone()),
                MatrixWeight::Quantized(q) => MatrixWeight::Quantized(q.clone()),
            };
            Some(Linear::from_matrix(shared)?)
        } else {
            Some(Linear::load(weights, "lm_head", hidden, vocab, false)?)
        };
        let embed_tokens = match table {
            Some(_) if !selection.embedding => None,
            Some(MatrixWeight::Dense(t)) => Some(Embedding::Dense(t)),
            Some(MatrixWeight::Quantized(q)) => Some(Embedding::Quantized(q)),
            None => None,
        };
        let total = selection.layers.len();
        let mut layers = Vec::with_capacity(total);
        for i in selection.layers.clone() {
            layers.push(DecoderLayer::load(weights, &config, i).with_context(|| format!("loading layer {i}"))?);
            on_layer(layers.len(), total);
        }
        let norm = if selection.head {
            Some(RmsNorm::load(weights, "model.norm.weight", hidden, config.rms_norm_eps)?)
        } else {
            None
        };
        Ok(Self {
            config,
            selection,
            embed_tokens,
            layers,
            norm,
            lm_head,
            dtype: weights.policy.dtype,
            device: weights.device.clone(),
        })
    }

    /// A fresh cache for the layers this decoder holds.
    pub fn new_cache(&self) -> KvCache {
        KvCache::new(self.layers.len())
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Dtype of the activations (and dense weights).
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Embeds token ids into hidden states `(1, t, hidden)`.
    pub fn embed(&self, tokens: &[u32]) -> Result<Tensor> {
        let table = self
            .embed_tokens
            .as_ref()
            .context("this stage holds no token embedding")?;
        if let Some(&bad) = tokens.iter().find(|&&t| t as usize >= self.config.vocab_size) {
            bail!("token id {bad} is outside the vocabulary (size {})", self.config.vocab_size);
        }
        let ids = Tensor::new(tokens, &self.device)?;
        Ok(table.lookup(&ids)?.to_dtype(self.dtype)?.unsqueeze(0)?)
    }

    /// Runs this decoder's layers over hidden states `(1, t, hidden)`.
    pub fn forward_layers(&self, hidden: &Tensor, cache: &mut KvCache) -> Result<Tensor> {
        let mut x = hidden.to_dtype(self.dtype)?;
        for (layer, layer_cache) in self.layers.iter().zip(cache.layers.iter_mut()) {
            x = layer.forward(&x, layer_cache)?;
        }
        Ok(x)
    }

    /// Final norm and LM head: f32 logits `(positions, vocab)`.
    pub fn logits(&self, hidden: &Tensor, which: LogitsFor) -> Result<Tensor> {
        let t = hidden.dim(1)?;
        let hidden = match which {
            LogitsFor::Last => hidden.narrow(1, t - 1, 1)?,
            LogitsFor::All => hidden.clone(),
        };
        self.head_logits(&self.final_norm(&hidden)?)
    }

    /// The final norm: the language model's output hidden states.
    pub fn final_norm(&self, hidden: &Tensor) -> Result<Tensor> {
        self.norm.as_ref().context("this stage holds no final norm")?.forward(hidden)
    }

    /// The LM head on normed hidden states `(1, t, hidden)`: f32 logits `(t, vocab)`.
    pub fn head_logits(&self, normed: &Tensor) -> Result<Tensor> {
        let head = self.lm_head.as_ref().context("this stage holds no LM head")?;
        Ok(head.forward(normed)?.squeeze(0)?.to_dtype(DType::F32)?)
    }

    /// Embedding, all layers and head in one call (a whole model).
    pub fn forward(&self, tokens: &[u32], cache: &mut KvCache, which: LogitsFor) -> Result<Tensor> {
        if tokens.is_empty() {
            bail!("no tokens to run");
        }
        let hidden = self.embed(tokens)?;
        let hidden = self.forward_layers(&hidden, cache)?;
        self.logits(&hidden, which)
    }
}
