//! The decoder-only transformer every supported family runs on.
//!
//! `embed → layers (pre-norm attention + pre-norm gated MLP, residuals) →
//! final norm → LM head`. A [`Decoder`] may hold only a range of layers (a
//! cluster stage): then it has the embedding only if it is the first stage
//! and the head only if it is the last, and hidden states travel between
//! stages through [`Decoder::forward_layers`].

use super::config::{ModelConfig, TokenMixer};
use super::context::kv_positions;
use super::gpu_offload::{
    device_name, layer_cache_vram, shared_gpu, usable_vram, FillOutcome, GpuFill, GpuMode, GpuPlacement, GpuRequest,
};
use super::kernel_census::KernelUse;
use super::nn::attention::Attention;
use super::nn::gated_delta_net::GatedDeltaNet;
use super::nn::gpu_block::{self, GpuBlock};
use super::nn::kv_cache::{KvCache, KvPrecision, LayerCache};
use super::nn::linear::Linear;
use super::nn::mlp::GatedMlp;
use super::nn::moe::SparseMoe;
use super::nn::norm::RmsNorm;
use super::sources::selection::TensorSelection;
use super::weights::{MappedMatrix, MatrixWeight, Weights};
use anyhow::{bail, Context, Result};
use cake_gpu::{Gpu, GpuTensor};
use cake_kernels::packed::PackedMatrix;
use candle_core::quantized::QTensor;
use candle_core::{DType, Device, Tensor};
use std::ops::Range;
use std::sync::Arc;

/// One transformer block. Pre-norm blocks normalise each sub-layer's input,
/// post-norm blocks (OLMo 2) its output before the residual add, sandwich
/// blocks (Gemma 3) both.
struct DecoderLayer {
    mixer: Mixer,
    mlp: FeedForward,
    /// Before attention (`input_layernorm`).
    attention_input_norm: Option<RmsNorm>,
    /// After attention (`post_attention_layernorm`).
    attention_output_norm: Option<RmsNorm>,
    /// Before the MLP (`post_attention_layernorm` in pre-norm blocks,
    /// `pre_feedforward_layernorm` in sandwich blocks).
    mlp_input_norm: Option<RmsNorm>,
    /// After the MLP (`post_feedforward_layernorm`).
    mlp_output_norm: Option<RmsNorm>,
}

impl DecoderLayer {
    fn load(weights: &Weights, cfg: &ModelConfig, index: usize) -> Result<Self> {
        let prefix = format!("model.layers.{index}");
        let [attention_input_norm, attention_output_norm, mlp_input_norm, mlp_output_norm] =
            cfg.norm_placement.norm_names().map(|name| {
                name.map(|name| RmsNorm::load_for(weights, &format!("{prefix}.{name}.weight"), cfg.hidden_size, cfg))
                    .transpose()
            });
        let (attention_input_norm, attention_output_norm, mlp_input_norm, mlp_output_norm) =
            (attention_input_norm?, attention_output_norm?, mlp_input_norm?, mlp_output_norm?);
        Ok(Self {
            mixer: Mixer::load(weights, &prefix, cfg, index)?,
            mlp: FeedForward::load(weights, &format!("{prefix}.mlp"), cfg, index)?,
            attention_input_norm,
            attention_output_norm,
            mlp_input_norm,
            mlp_output_norm,
        })
    }

    fn weight_bytes(&self) -> usize {
        let norms =
            [&self.attention_input_norm, &self.attention_output_norm, &self.mlp_input_norm, &self.mlp_output_norm];
        let norms: usize = norms.iter().filter_map(|n| n.as_ref()).map(RmsNorm::weight_bytes).sum();
        self.mixer.weight_bytes() + self.mlp.weight_bytes() + norms
    }

    fn forward(&self, x: &Tensor, caches: RowCaches) -> Result<Tensor> {
        let attention = self.mixer.forward(&apply(&self.attention_input_norm, x)?, caches)?;
        let x = (x + apply(&self.attention_output_norm, &attention)?)?;
        let mlp = self.mlp.forward(&apply(&self.mlp_input_norm, &x)?)?;
        Ok((&x + apply(&self.mlp_output_norm, &mlp)?)?)
    }
}

/// A block on the CPU or on the GPU.
enum Block {
    Cpu(Box<DecoderLayer>),
    Gpu(Box<GpuBlock>),
}

impl Block {
    /// Bytes of weights in RAM (a GPU block holds none).
    fn weight_bytes(&self) -> usize {
        match self {
            Self::Cpu(layer) => layer.weight_bytes(),
            Self::Gpu(_) => 0,
        }
    }
}

/// Hidden states between blocks: in RAM, or in VRAM between GPU blocks.
enum Hidden {
    Cpu(Tensor),
    Gpu { values: GpuTensor, tokens: usize },
}

impl Hidden {
    /// The states as a CPU tensor `(1, tokens, hidden)` of `dtype`.
    fn into_cpu(self, gpu_of: Option<&GpuBlock>, hidden: usize, dtype: DType) -> Result<Tensor> {
        match self {
            Self::Cpu(x) => Ok(x),
            Self::Gpu { values, tokens } => {
                let gpu = gpu_of.context("hidden states on a GPU without its block")?.gpu();
                let values = gpu.read(&values, tokens * hidden)?;
                Ok(Tensor::from_vec(values, (1, tokens, hidden), &Device::Cpu)?.to_dtype(dtype)?)
            }
        }
    }
}

/// What mixes positions in a block: attention, or Gated DeltaNet.
enum Mixer {
    Attention(Attention),
    GatedDeltaNet(GatedDeltaNet),
}

impl Mixer {
    fn load(weights: &Weights, prefix: &str, cfg: &ModelConfig, layer: usize) -> Result<Self> {
        Ok(match (cfg.layers[layer].mixer, cfg.gated_delta_net) {
            (TokenMixer::GatedDeltaNet, Some(sizes)) => {
                Self::GatedDeltaNet(GatedDeltaNet::load(weights, &format!("{prefix}.linear_attn"), cfg, sizes)?)
            }
            (TokenMixer::GatedDeltaNet, None) => {
                bail!("layer {layer} is linear attention but the config gives no sizes for it")
            }
            (TokenMixer::Attention, _) => {
                Self::Attention(Attention::load(weights, &format!("{prefix}.self_attn"), cfg, &cfg.layers[layer])?)
            }
        })
    }

    fn weight_bytes(&self) -> usize {
        match self {
            Self::Attention(a) => a.weight_bytes(),
            Self::GatedDeltaNet(g) => g.weight_bytes(),
        }
    }

    fn forward(&self, x: &Tensor, caches: RowCaches) -> Result<Tensor> {
        match (self, caches) {
            (Self::Attention(a), RowCaches::Sequence { cache, mutual }) => a.forward(x, cache, mutual),
            (Self::Attention(a), RowCaches::Streams(caches)) => a.forward_streams(x, caches),
            // A recurrence reads positions in order: nothing sees ahead.
            (Self::GatedDeltaNet(g), RowCaches::Sequence { cache, .. }) => g.forward(x, cache),
            // Its projections are a small part of the step: one row at a time.
            (Self::GatedDeltaNet(g), RowCaches::Streams(caches)) => {
                let rows = caches
                    .iter_mut()
                    .enumerate()
                    .map(|(i, cache)| g.forward(&x.narrow(1, i, 1)?, cache))
                    .collect::<Result<Vec<_>>>()?;
                Ok(Tensor::cat(&rows, 1)?)
            }
        }
    }
}

/// Whose positions the rows of a layer's input `(1, n, hidden)` are.
enum RowCaches<'c, 'a> {
    /// Consecutive positions of one sequence, after those in its cache;
    /// the positions in one of the `mutual` spans see each other both ways.
    Sequence { cache: &'c mut LayerCache, mutual: &'c [Range<usize>] },
    /// Row `i` is the next position of the sequence whose cache is `[i]`.
    Streams(&'c mut [&'a mut LayerCache]),
}

/// A block's feed-forward part: the dense gated MLP, or experts.
enum FeedForward {
    Dense(GatedMlp),
    Sparse(SparseMoe),
}

impl FeedForward {
    fn load(weights: &Weights, prefix: &str, cfg: &ModelConfig, layer: usize) -> Result<Self> {
        Ok(match &cfg.moe {
            Some(moe) if moe.sparse_layers.get(layer).copied().unwrap_or(false) => {
                Self::Sparse(SparseMoe::load(weights, prefix, cfg, moe)?)
            }
            _ => Self::Dense(GatedMlp::load(weights, prefix, cfg)?),
        })
    }

    fn weight_bytes(&self) -> usize {
        match self {
            Self::Dense(mlp) => mlp.weight_bytes(),
            Self::Sparse(moe) => moe.weight_bytes(),
        }
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        match self {
            Self::Dense(mlp) => mlp.forward(x),
            Self::Sparse(moe) => moe.forward(x),
        }
    }
}

/// `norm(x)`, or `x` where the block has no norm at that place.
fn apply(norm: &Option<RmsNorm>, x: &Tensor) -> Result<Tensor> {
    match norm {
        Some(norm) => norm.forward(x),
        None => Ok(x.clone()),
    }
}

/// Token embedding table, dense or quantized.
enum Embedding {
    Dense(Tensor),
    Quantized(Arc<QTensor>),
    Packed(Arc<PackedMatrix>),
    Mapped(Arc<MappedMatrix>),
}

impl Embedding {
    fn lookup(&self, ids: &Tensor) -> Result<Tensor> {
        Ok(match self {
            Self::Dense(table) => table.index_select(ids, 0)?,
            Self::Quantized(q) => q.embedding(ids)?,
            // `Decoder::embed` checked the ids against the vocabulary.
            Self::Packed(table) => gather_rows(ids, table.cols, |id, row| table.dequantize_row(id, row))?,
            Self::Mapped(table) => gather_rows(ids, table.cols, |id, row| table.row_into(id, row))?,
        })
    }

    fn weight_bytes(&self) -> usize {
        match self {
            Self::Dense(t) => crate::models::fp8::tensor_bytes(t),
            Self::Quantized(q) => q.storage_size_in_bytes(),
            Self::Packed(p) => p.bytes(),
            Self::Mapped(m) => m.bytes(),
        }
    }
}

/// The rows `ids` pick from a table of `cols`-wide rows, each written by
/// `fill(id, row)`: shape `(ids..., cols)`.
fn gather_rows(ids: &Tensor, cols: usize, fill: impl Fn(usize, &mut [f32])) -> Result<Tensor> {
    let wanted = ids.flatten_all()?.to_vec1::<u32>()?;
    let mut rows = vec![0f32; wanted.len() * cols];
    for (&id, row) in wanted.iter().zip(rows.chunks_exact_mut(cols)) {
        fill(id as usize, row);
    }
    let mut dims = ids.dims().to_vec();
    dims.push(cols);
    Ok(Tensor::from_vec(rows, dims, ids.device())?)
}

/// Hidden states `(1, t, hidden)` copied into VRAM as f32.
fn upload_hidden(block: &GpuBlock, x: &Tensor) -> Result<GpuTensor> {
    let values = x.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()?;
    block.gpu().upload("hidden", &values)
}

/// Choosing layers for the GPU as they load: the first ones it can run,
/// up to the count and VRAM asked for (by [`GpuFill`]'s rule, which the
/// cluster planner predicts with).
struct Offload {
    gpu: Option<Arc<Gpu>>,
    placement: GpuPlacement,
    fill: GpuFill,
    /// What limits the VRAM, for the reason a layer stays on the CPU.
    vram_limit: String,
}

impl Offload {
    fn new(request: GpuRequest) -> Self {
        let mut placement = GpuPlacement::default();
        let gpu = match request.mode {
            GpuMode::Off => None,
            mode => match shared_gpu(mode) {
                Ok(gpu) => {
                    placement.device = Some(device_name(&gpu));
                    Some(gpu)
                }
                Err(why) => {
                    placement.cpu_reasons.push(format!("no GPU: {why}"));
                    None
                }
            },
        };
        let mb = |bytes: u64| format!("{:.1} MB", bytes as f64 / 1e6);
        let (max_bytes, vram_limit) = match (request.memory, gpu.as_deref().and_then(usable_vram)) {
            (Some(cap), _) => (Some(cap), format!("over the GPU memory cap of {}", mb(cap))),
            (None, Some(usable)) => (Some(usable), format!("over the GPU's free memory ({} usable)", mb(usable))),
            (None, None) => (None, String::new()),
        };
        Self { gpu, placement, fill: GpuFill::new(request.layers, max_bytes), vram_limit }
    }

    /// Layer `index` uploaded to the GPU, or `None` for the CPU (the
    /// reason noted in the placement).
    fn try_load(&mut self, weights: &Weights, cfg: &ModelConfig, index: usize, context: usize) -> Option<GpuBlock> {
        let gpu = self.gpu.clone()?;
        if !self.fill.takes_more() {
            return None;
        }
        if let Some(why) = gpu_block::unsupported(cfg, index) {
            self.placement.cpu_reasons.push(format!("layer {index}: {why}"));
            return None;
        }
        let block = match GpuBlock::load(&gpu, weights, cfg, index) {
            Ok(block) => block,
            Err(error) => {
                self.placement.cpu_reasons.push(format!("layer {index} and later: {error:#}"));
                self.fill.close();
                return None;
            }
        };
        let cache = layer_cache_vram(cfg.num_key_value_heads, cfg.head_dim, context);
        match self.fill.offer(block.vram_bytes() + cache) {
            FillOutcome::Taken => {
                self.placement.weight_bytes += block.vram_bytes();
                self.placement.layers.push(index);
                Some(block)
            }
            FillOutcome::NoRoom => {
                self.placement.cpu_reasons.push(format!("layer {index} and later: {}", self.vram_limit));
                None
            }
            FillOutcome::CountReached | FillOutcome::Full => None,
        }
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
    layers: Vec<Block>,
    norm: Option<RmsNorm>,
    lm_head: Option<Linear>,
    dtype: DType,
    device: Device,
    /// Which kernel each stored type of matrix went to.
    pub kernels: Vec<KernelUse>,
    /// What new caches keep f32 keys and values in.
    kv_precision: KvPrecision,
    /// Tokens a sequence may hold; caches never grow beyond it.
    context_length: usize,
    /// Which layers the GPU runs.
    pub gpu: GpuPlacement,
}

impl Decoder {
    /// Loads the tensors `selection` names and checks their shapes against
    /// `config`, calling `on_layer(done, total)` as layers arrive.
    pub fn load(
        config: ModelConfig,
        weights: &Weights,
        selection: TensorSelection,
        context_length: usize,
        on_layer: &mut dyn FnMut(usize, usize),
    ) -> Result<Self> {
        Self::load_placed(config, weights, selection, context_length, GpuRequest::default(), on_layer)
    }

    /// [`Self::load`], with the layers `gpu` asks for on the GPU (those it
    /// can run and that fit; the rest, and all of them when there is no
    /// GPU, on the CPU, with the reasons in [`Self::gpu`]).
    pub fn load_placed(
        config: ModelConfig,
        weights: &Weights,
        selection: TensorSelection,
        context_length: usize,
        gpu: GpuRequest,
        on_layer: &mut dyn FnMut(usize, usize),
    ) -> Result<Self> {
        let n = config.num_hidden_layers();
        if selection.layers.end > n || selection.layers.start > selection.layers.end {
            bail!("layer range {:?} is outside the model's {n} layers", selection.layers);
        }
        let (vocab, hidden) = (config.vocab_size, config.hidden_size);
        let embed_name = "model.embed_tokens.weight";
        let needs_table = selection.embedding || (selection.head && config.tie_word_embeddings);
        let table = if needs_table { Some(weights.matrix(embed_name, &[vocab, hidden])?) } else { None };
        let lm_head = if !selection.head {
            None
        } else if config.tie_word_embeddings || !weights.contains("lm_head.weight") {
            let shared = table.as_ref().context("tied LM head needs the embedding")?.share();
            Some(Linear::from_matrix(shared)?)
        } else {
            Some(Linear::load(weights, "lm_head", hidden, vocab, false)?)
        };
        let embed_tokens = match table {
            Some(_) if !selection.embedding => None,
            Some(MatrixWeight::Dense(t)) => Some(Embedding::Dense(t)),
            Some(MatrixWeight::Quantized(q)) => Some(Embedding::Quantized(q)),
            Some(MatrixWeight::Packed(p)) => Some(Embedding::Packed(p)),
            Some(MatrixWeight::Mapped(m)) => Some(Embedding::Mapped(m)),
            // A lookup reads rows, not products: dequantize the table once.
            Some(MatrixWeight::Fp8(m)) => Some(Embedding::Dense(m.dequantize(weights.policy.dtype)?)),
            None => None,
        };
        let total = selection.layers.len();
        let mut layers = Vec::with_capacity(total);
        let mut offload = Offload::new(gpu);
        for i in selection.layers.clone() {
            let layer = match offload.try_load(weights, &config, i, context_length) {
                Some(block) => Block::Gpu(Box::new(block)),
                None => {
                    let layer =
                        DecoderLayer::load(weights, &config, i).with_context(|| format!("loading layer {i}"))?;
                    Block::Cpu(Box::new(layer))
                }
            };
            layers.push(layer);
            on_layer(layers.len(), total);
        }
        let norm =
            if selection.head { Some(RmsNorm::load_for(weights, "model.norm.weight", hidden, &config)?) } else { None };
        Ok(Self {
            config,
            selection,
            embed_tokens,
            layers,
            norm,
            lm_head,
            dtype: weights.policy.dtype,
            device: weights.device.clone(),
            kernels: weights.census.uses(),
            // An explicit dtype (`--dtype f32`: the exact computation) keeps
            // keys and values as computed.
            kv_precision: KvPrecision::for_weights(
                weights.policy.keep_quantized && weights.census.any_ggml_below_f32(),
            ),
            context_length,
            gpu: offload.placement,
        })
    }

    /// Bytes of weights this decoder holds in memory (a matrix shared by
    /// the embedding and a tied head counted once).
    pub fn weight_bytes(&self) -> usize {
        let embedding = self.embed_tokens.as_ref().map_or(0, Embedding::weight_bytes);
        let shares_table = self.config.tie_word_embeddings && self.embed_tokens.is_some();
        let head = match &self.lm_head {
            Some(head) if !shares_table => head.weight_bytes(),
            _ => 0,
        };
        let layers: usize = self.layers.iter().map(Block::weight_bytes).sum();
        embedding + layers + self.norm.as_ref().map_or(0, RmsNorm::weight_bytes) + head
    }

    /// What this decoder's caches keep f32 keys and values in.
    pub fn kv_precision(&self) -> KvPrecision {
        self.kv_precision
    }

    /// A fresh cache for the layers this decoder holds.
    pub fn new_cache(&self) -> KvCache {
        let layers = &self.config.layers[self.selection.layers.clone()];
        let positions = layers.iter().map(|layer| kv_positions(layer, self.context_length));
        KvCache::bounded(self.kv_precision, positions.collect())
    }

    /// Tokens a sequence may hold (prompt and reply).
    pub fn context_length(&self) -> usize {
        self.context_length
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
        let table = self.embed_tokens.as_ref().context("this stage holds no token embedding")?;
        if let Some(&bad) = tokens.iter().find(|&&t| t as usize >= self.config.vocab_size) {
            bail!("token id {bad} is outside the vocabulary (size {})", self.config.vocab_size);
        }
        let ids = Tensor::new(tokens, &self.device)?;
        let embedded = table.lookup(&ids)?.to_dtype(self.dtype)?;
        let embedded = match self.config.embedding_scale {
            // The scale is rounded to the compute dtype first, as transformers does.
            Some(scale) => embedded.broadcast_mul(&Tensor::new(scale as f32, &self.device)?.to_dtype(self.dtype)?)?,
            None => embedded,
        };
        Ok(embedded.unsqueeze(0)?)
    }

    /// Runs this decoder's layers over hidden states `(1, t, hidden)`.
    pub fn forward_layers(&self, hidden: &Tensor, cache: &mut KvCache) -> Result<Tensor> {
        self.forward_layers_seeing(hidden, cache, &[])
    }

    /// Like [`Self::forward_layers`], where the positions of each `mutual`
    /// span (absolute positions, each within this input or before it) see
    /// each other both ways: one picture's tokens in Gemma 3.
    pub fn forward_layers_seeing(
        &self,
        hidden: &Tensor,
        cache: &mut KvCache,
        mutual: &[Range<usize>],
    ) -> Result<Tensor> {
        let tokens = hidden.dim(1)?;
        let mut x = Hidden::Cpu(hidden.to_dtype(self.dtype)?);
        let mut last_gpu = None;
        for (layer, layer_cache) in self.layers.iter().zip(cache.layers.iter_mut()) {
            x = match layer {
                Block::Cpu(layer) => {
                    let input = x.into_cpu(last_gpu, self.config.hidden_size, self.dtype)?;
                    Hidden::Cpu(layer.forward(&input, RowCaches::Sequence { cache: layer_cache, mutual })?)
                }
                Block::Gpu(block) => {
                    let values = match x {
                        Hidden::Gpu { values, .. } => values,
                        Hidden::Cpu(input) => upload_hidden(block, &input)?,
                    };
                    last_gpu = Some(block);
                    Hidden::Gpu { values: block.forward(&values, tokens, layer_cache, mutual)?, tokens }
                }
            };
        }
        x.into_cpu(last_gpu, self.config.hidden_size, self.dtype)
    }

    /// Runs this decoder's layers over hidden states `(1, n, hidden)` whose
    /// row `i` is the next position of the sequence cached in `caches[i]`
    /// (one decode step of several sequences, weights read once for all).
    pub fn forward_layers_streams(&self, hidden: &Tensor, caches: &mut [&mut KvCache]) -> Result<Tensor> {
        if hidden.dim(1)? != caches.len() {
            bail!("{} rows of hidden states for {} sequences", hidden.dim(1)?, caches.len());
        }
        let mut x = hidden.to_dtype(self.dtype)?;
        for (index, layer) in self.layers.iter().enumerate() {
            let mut layer_caches: Vec<&mut LayerCache> = caches.iter_mut().map(|c| &mut c.layers[index]).collect();
            x = match layer {
                Block::Cpu(layer) => layer.forward(&x, RowCaches::Streams(&mut layer_caches))?,
                // Each sequence's row over its own cache in VRAM.
                Block::Gpu(block) => {
                    let rows = (layer_caches.iter_mut().enumerate())
                        .map(|(i, cache)| {
                            let row = upload_hidden(block, &x.narrow(1, i, 1)?)?;
                            let out = block.forward(&row, 1, cache, &[])?;
                            Hidden::Gpu { values: out, tokens: 1 }.into_cpu(
                                Some(block),
                                self.config.hidden_size,
                                self.dtype,
                            )
                        })
                        .collect::<Result<Vec<_>>>()?;
                    Tensor::cat(&rows, 1)?
                }
            };
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
        let logits = head.forward(normed)?.squeeze(0)?.to_dtype(DType::F32)?;
        Ok(match self.config.final_logit_softcapping {
            Some(cap) => ((logits / cap)?.tanh()? * cap)?,
            None => logits,
        })
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
