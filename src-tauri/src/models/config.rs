//! The one description of a decoder-only transformer that every family maps to.
//!
//! Each family module reads its own `config.json` (or GGUF metadata) and fills a
//! [`ModelConfig`]; the shared decoder only ever looks at this struct, so what
//! makes a family different is visible in one place: its config mapping.

use anyhow::{bail, Context, Result};
use serde::Deserialize;
use serde_json::Value;

/// Text model architectures the engine can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Architecture {
    Llama,
    Qwen2,
    Qwen3,
    Mistral,
    Olmo2,
    Phi3,
    Exaone4,
    Gemma3,
    Qwen3Moe,
    Qwen3_5,
    Qwen3_5Moe,
    Qwen3Next,
}

impl Architecture {
    /// Every supported architecture, for error messages and docs.
    pub const ALL: [Architecture; 12] = [
        Self::Llama,
        Self::Qwen2,
        Self::Qwen3,
        Self::Qwen3Moe,
        Self::Qwen3_5,
        Self::Qwen3_5Moe,
        Self::Qwen3Next,
        Self::Mistral,
        Self::Olmo2,
        Self::Phi3,
        Self::Exaone4,
        Self::Gemma3,
    ];

    /// The `model_type` spelling used by Hugging Face configs.
    pub fn model_type(self) -> &'static str {
        match self {
            Self::Llama => "llama",
            Self::Qwen2 => "qwen2",
            Self::Qwen3 => "qwen3",
            Self::Mistral => "mistral",
            Self::Olmo2 => "olmo2",
            Self::Phi3 => "phi3",
            Self::Exaone4 => "exaone4",
            Self::Gemma3 => "gemma3_text",
            Self::Qwen3Moe => "qwen3_moe",
            Self::Qwen3_5 => "qwen3_5_text",
            Self::Qwen3_5Moe => "qwen3_5_moe_text",
            Self::Qwen3Next => "qwen3_next",
        }
    }

    fn from_class_name(class: &str) -> Option<Self> {
        Some(match class {
            "LlamaForCausalLM" => Self::Llama,
            "Qwen2ForCausalLM" => Self::Qwen2,
            "Qwen3ForCausalLM" => Self::Qwen3,
            "MistralForCausalLM" => Self::Mistral,
            "Olmo2ForCausalLM" => Self::Olmo2,
            "Phi3ForCausalLM" => Self::Phi3,
            "Exaone4ForCausalLM" => Self::Exaone4,
            "Gemma3ForCausalLM" => Self::Gemma3,
            "Qwen3MoeForCausalLM" => Self::Qwen3Moe,
            "Qwen3_5ForCausalLM" => Self::Qwen3_5,
            "Qwen3_5MoeForCausalLM" => Self::Qwen3_5Moe,
            "Qwen3NextForCausalLM" => Self::Qwen3Next,
            _ => return None,
        })
    }

    /// Parses a `model_type` (config.json) or `general.architecture` (GGUF).
    pub fn from_model_type(model_type: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.model_type() == model_type)
    }

    /// Detects the architecture from config.json's `architectures` and `model_type`.
    pub fn detect(architectures: &[String], model_type: Option<&str>) -> Result<Self> {
        let found = architectures
            .iter()
            .find_map(|c| Self::from_class_name(c))
            .or_else(|| model_type.and_then(Self::from_model_type));
        found.with_context(|| {
            let named = if architectures.is_empty() {
                model_type.unwrap_or("(none given)").to_string()
            } else {
                architectures.join(", ")
            };
            format!("unsupported model architecture `{named}`; supported: {}", Self::supported_list())
        })
    }

    /// Human-readable list of supported architectures.
    pub fn supported_list() -> String {
        Self::ALL.iter().map(|a| a.model_type()).collect::<Vec<_>>().join(", ")
    }
}

/// How rotary position frequencies are rescaled for long contexts.
#[derive(Debug, Clone, PartialEq)]
pub enum RopeScaling {
    None,
    /// Positions divided by `factor`.
    Linear {
        factor: f64,
    },
    /// Llama 3's frequency-dependent scaling.
    Llama3 {
        factor: f64,
        low_freq_factor: f64,
        high_freq_factor: f64,
        original_max_position_embeddings: f64,
    },
    /// LongRoPE (Phi-3/4): per-frequency divisors, the long set once a
    /// sequence grows past `original_max_position_embeddings`, and cos/sin
    /// multiplied by `attention_factor`.
    LongRope {
        short_factor: Vec<f64>,
        long_factor: Vec<f64>,
        original_max_position_embeddings: usize,
        attention_factor: f64,
    },
}

/// Which RMSNorm, if any, q and k get before rotary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QkNorm {
    None,
    /// One norm of `head_dim` applied to each head (Qwen3).
    PerHead,
    /// One norm over the whole projection, all heads at once (OLMo 2).
    Whole,
}

/// Where a block normalises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NormPlacement {
    /// `x + attn(norm(x))`, then `x + mlp(norm(x))` (Llama and most others).
    Pre,
    /// `x + norm(attn(x))`, then `x + norm(mlp(x))` (OLMo 2).
    Post,
    /// Both: `x + norm(attn(norm(x)))`, then `x + norm(mlp(norm(x)))` (Gemma 3).
    Sandwich,
}

/// The checkpoint names of a block's norms, where it has them: before and
/// after attention, before and after the MLP.
pub type BlockNormNames = [Option<&'static str>; 4];

impl NormPlacement {
    /// Which norms a block of this placement has, by checkpoint name.
    pub fn norm_names(self) -> BlockNormNames {
        match self {
            Self::Pre => [Some("input_layernorm"), None, Some("post_attention_layernorm"), None],
            Self::Post => [None, Some("post_attention_layernorm"), None, Some("post_feedforward_layernorm")],
            Self::Sandwich => [
                Some("input_layernorm"),
                Some("post_attention_layernorm"),
                Some("pre_feedforward_layernorm"),
                Some("post_feedforward_layernorm"),
            ],
        }
    }
}

/// The activation of the gated MLP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    /// `silu` / `swish`.
    Silu,
    /// GELU's tanh approximation (`gelu_pytorch_tanh`).
    GeluTanh,
}

/// Rotary embedding parameters of one attention layer.
#[derive(Debug, Clone, PartialEq)]
pub struct RopeConfig {
    pub theta: f64,
    pub scaling: RopeScaling,
    /// The share of each head's dimensions that rotates (the first ones);
    /// the rest pass through unchanged.
    pub partial_rotary_factor: f64,
    /// Which dimensions of a head rotate together.
    pub pairs: RotaryPairs,
}

/// Which two dimensions of a head form one rotating pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RotaryPairs {
    /// Dimension `i` with `i + rotary_dim / 2`, as transformers rotates.
    #[default]
    HalfSplit,
    /// Dimension `2i` with `2i + 1`: the row order llama.cpp's converter
    /// gives Llama's q and k in GGUF files, used as stored.
    Adjacent,
}

/// Values outside a rope parameter object that it may fall back on.
#[derive(Debug, Clone, Copy)]
pub struct RopeContext {
    pub theta: Option<f64>,
    pub partial_rotary_factor: Option<f64>,
    pub original_max_position_embeddings: Option<usize>,
    pub max_position_embeddings: Option<usize>,
}

impl RopeConfig {
    /// Reads one rope parameter object: either the transformers ≥ 5
    /// `rope_parameters` shape (`rope_type`, `rope_theta`, scaling keys) or an
    /// old-style `rope_scaling` object with `rope_theta` given separately.
    pub fn from_json(params: Option<&Value>, context: RopeContext) -> Result<Self> {
        let get = |key: &str| params.and_then(|p| p.get(key)).and_then(Value::as_f64);
        let theta = get("rope_theta")
            .or(context.theta)
            .context("config.json gives no `rope_theta` (nor `rope_parameters.rope_theta`)")?;
        let kind = params
            .and_then(|p| p.get("rope_type").or_else(|| p.get("type")))
            .and_then(Value::as_str)
            .unwrap_or("default");
        let need = |key: &str| get(key).with_context(|| format!("rope scaling `{kind}` needs `{key}` in config.json"));
        let scaling = match kind {
            "default" => RopeScaling::None,
            "linear" => RopeScaling::Linear { factor: need("factor")? },
            "llama3" => RopeScaling::Llama3 {
                factor: need("factor")?,
                low_freq_factor: need("low_freq_factor")?,
                high_freq_factor: need("high_freq_factor")?,
                original_max_position_embeddings: need("original_max_position_embeddings")?,
            },
            // "su" is the name older Phi-3 configs give it.
            "longrope" | "su" => {
                let factors = |key: &str| -> Result<Vec<f64>> {
                    let list = params.and_then(|p| p.get(key)).and_then(Value::as_array);
                    list.and_then(|l| l.iter().map(Value::as_f64).collect::<Option<Vec<f64>>>()).with_context(|| {
                        format!("rope scaling `longrope` needs a list of numbers `{key}` in config.json")
                    })
                };
                let original = get("original_max_position_embeddings")
                    .map(|v| v as usize)
                    .or(context.original_max_position_embeddings)
                    .context("rope scaling `longrope` needs `original_max_position_embeddings` in config.json")?;
                if original < 2 {
                    bail!("rope scaling `longrope`: original_max_position_embeddings must be at least 2");
                }
                // As transformers: the context extension factor, and from it the attention factor.
                let factor = get("factor")
                    .unwrap_or_else(|| context.max_position_embeddings.unwrap_or(original) as f64 / original as f64);
                let attention_factor = get("attention_factor").unwrap_or(if factor <= 1.0 {
                    1.0
                } else {
                    (1.0 + factor.ln() / (original as f64).ln()).sqrt()
                });
                RopeScaling::LongRope {
                    short_factor: factors("short_factor")?,
                    long_factor: factors("long_factor")?,
                    original_max_position_embeddings: original,
                    attention_factor,
                }
            }
            other => {
                bail!("rope scaling type `{other}` is not supported yet (supported: default, linear, llama3, longrope)")
            }
        };
        let partial_rotary_factor = get("partial_rotary_factor").or(context.partial_rotary_factor).unwrap_or(1.0);
        if !(partial_rotary_factor > 0.0 && partial_rotary_factor <= 1.0) {
            bail!("config.json: partial_rotary_factor {partial_rotary_factor} is not in (0, 1]");
        }
        Ok(Self { theta, scaling, partial_rotary_factor, pairs: RotaryPairs::HalfSplit })
    }
}

/// Attention flavour of one layer.
#[derive(Debug, Clone, PartialEq)]
pub struct LayerAttention {
    /// Keys older than this many positions are masked out; `None` is full attention.
    pub sliding_window: Option<usize>,
    pub rope: RopeConfig,
    /// Whether q and k rotate at all (EXAONE 4's global layers use no
    /// position encoding).
    pub uses_rope: bool,
    /// What mixes the positions: attention, or Qwen3.5's linear attention.
    pub mixer: TokenMixer,
}

/// What a layer mixes positions with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenMixer {
    /// Softmax attention over a KV cache.
    Attention,
    /// Gated DeltaNet linear attention with a recurrent state (Qwen3.5).
    GatedDeltaNet,
}

/// Sizes of Qwen3.5's Gated DeltaNet layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GatedDeltaNetConfig {
    pub num_key_heads: usize,
    pub num_value_heads: usize,
    pub key_head_dim: usize,
    pub value_head_dim: usize,
    /// Width of the causal depthwise convolution over q, k and v.
    pub conv_kernel: usize,
}

/// A sparse mixture-of-experts feed-forward block (Qwen3-MoE).
#[derive(Debug, Clone, PartialEq)]
pub struct MoeConfig {
    pub num_experts: usize,
    /// Experts each token is sent to.
    pub experts_per_token: usize,
    /// Each expert's gated-MLP width.
    pub expert_intermediate_size: usize,
    /// Renormalise the chosen experts' router probabilities to sum to one.
    pub normalize_top_k: bool,
    /// Per layer: sparse (experts) or dense (the ordinary MLP).
    pub sparse_layers: Vec<bool>,
    /// A shared expert every token also goes through, weighted by
    /// `sigmoid(shared_expert_gate(x))` (Qwen3.5-MoE), of this width.
    pub shared_expert_intermediate_size: Option<usize>,
}

/// Everything the shared decoder needs to build and run a model.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelConfig {
    pub architecture: Architecture,
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_attention_heads: usize,
    pub num_key_value_heads: usize,
    pub head_dim: usize,
    pub rms_norm_eps: f64,
    pub max_position_embeddings: usize,
    pub tie_word_embeddings: bool,
    /// Bias on the q/k/v projections.
    pub qkv_bias: bool,
    /// Bias on the attention output projection.
    pub o_bias: bool,
    /// Bias on the MLP projections.
    pub mlp_bias: bool,
    /// RMSNorm of q and k before rotary (Qwen3: per head; OLMo 2: over the
    /// whole projection).
    pub qk_norm: QkNorm,
    /// Where each block's norms sit.
    pub norm_placement: NormPlacement,
    /// RMSNorm weights are stored centred on zero and applied as `1 + w` (Gemma).
    pub norm_unit_offset: bool,
    /// The gated MLP's activation.
    pub activation: Activation,
    /// Token embeddings are multiplied by this (Gemma: √hidden_size).
    pub embedding_scale: Option<f64>,
    /// Attention scores are scaled by `1/√this` instead of `1/√head_dim`.
    pub query_pre_attn_scalar: Option<f64>,
    /// Attention scores pass through `cap · tanh(s / cap)`.
    pub attn_logit_softcapping: Option<f64>,
    /// Final logits pass through `cap · tanh(l / cap)`.
    pub final_logit_softcapping: Option<f64>,
    /// Sparse mixture-of-experts feed-forward layers, if the family has them.
    pub moe: Option<MoeConfig>,
    /// FP8 checkpoints' scale blocks (rows, columns), when scales are per block.
    pub fp8_block_size: Option<(usize, usize)>,
    /// The sizes of the Gated DeltaNet layers, when the model has any.
    pub gated_delta_net: Option<GatedDeltaNetConfig>,
    /// Attention output multiplied by `sigmoid(gate)`, the gate coming from
    /// a second half of each head's q projection (Qwen3.5).
    pub attention_output_gate: bool,
    /// One entry per layer.
    pub layers: Vec<LayerAttention>,
    pub bos_token_id: Option<u32>,
    pub eos_token_ids: Vec<u32>,
}

impl ModelConfig {
    pub fn num_hidden_layers(&self) -> usize {
        self.layers.len()
    }

    /// Checks the numbers fit together, so later shape arithmetic cannot fail.
    pub fn validate(&self) -> Result<()> {
        let positive = [
            ("vocab_size", self.vocab_size),
            ("hidden_size", self.hidden_size),
            ("intermediate_size", self.intermediate_size),
            ("num_attention_heads", self.num_attention_heads),
            ("num_key_value_heads", self.num_key_value_heads),
            ("head_dim", self.head_dim),
            ("num_hidden_layers", self.layers.len()),
        ];
        for (name, value) in positive {
            if value == 0 {
                bail!("config: `{name}` must be positive");
            }
        }
        if !self.num_attention_heads.is_multiple_of(self.num_key_value_heads) {
            bail!(
                "config: num_attention_heads ({}) is not a multiple of num_key_value_heads ({})",
                self.num_attention_heads,
                self.num_key_value_heads
            );
        }
        if !self.head_dim.is_multiple_of(2) {
            bail!("config: head_dim ({}) must be even for rotary embeddings", self.head_dim);
        }
        Ok(())
    }
}

/// `config.json` as Hugging Face writes it, for the families of this module.
/// Every field is optional here; family mappings decide defaults.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct HfConfig {
    #[serde(default)]
    pub architectures: Vec<String>,
    pub model_type: Option<String>,
    pub vocab_size: Option<usize>,
    pub hidden_size: Option<usize>,
    pub intermediate_size: Option<usize>,
    pub num_hidden_layers: Option<usize>,
    pub num_attention_heads: Option<usize>,
    pub num_key_value_heads: Option<usize>,
    pub head_dim: Option<usize>,
    pub rms_norm_eps: Option<f64>,
    pub rope_theta: Option<f64>,
    pub rope_scaling: Option<Value>,
    pub rope_parameters: Option<Value>,
    pub max_position_embeddings: Option<usize>,
    pub original_max_position_embeddings: Option<usize>,
    pub partial_rotary_factor: Option<f64>,
    pub tie_word_embeddings: Option<bool>,
    pub attention_bias: Option<bool>,
    pub mlp_bias: Option<bool>,
    pub sliding_window: Option<usize>,
    pub use_sliding_window: Option<bool>,
    pub max_window_layers: Option<usize>,
    pub layer_types: Option<Vec<String>>,
    /// EXAONE 4's older way to give `layer_types`: a period (4: three local
    /// layers, then a global one) or a string such as "LLLG".
    pub sliding_window_pattern: Option<Value>,
    pub hidden_act: Option<String>,
    /// Gemma's name for `hidden_act`.
    pub hidden_activation: Option<String>,
    pub query_pre_attn_scalar: Option<f64>,
    pub attn_logit_softcapping: Option<f64>,
    pub final_logit_softcapping: Option<f64>,
    /// Mixture of experts (Qwen3-MoE); transformers 5 writes `num_local_experts`.
    #[serde(alias = "num_local_experts")]
    pub num_experts: Option<usize>,
    pub num_experts_per_tok: Option<usize>,
    pub moe_intermediate_size: Option<usize>,
    pub norm_topk_prob: Option<bool>,
    pub decoder_sparse_step: Option<usize>,
    pub mlp_only_layers: Option<Vec<usize>>,
    pub shared_expert_intermediate_size: Option<usize>,
    /// Qwen3.5's Gated DeltaNet layers.
    pub linear_conv_kernel_dim: Option<usize>,
    pub linear_key_head_dim: Option<usize>,
    pub linear_value_head_dim: Option<usize>,
    pub linear_num_key_heads: Option<usize>,
    pub linear_num_value_heads: Option<usize>,
    /// Qwen3.5's older way to give `layer_types`: every n-th layer is full attention.
    pub full_attention_interval: Option<usize>,
    /// Gemma 3's older rope base for its sliding layers.
    pub rope_local_base_freq: Option<f64>,
    pub bos_token_id: Option<Value>,
    pub eos_token_id: Option<Value>,
    pub quantization_config: Option<Value>,
}

impl HfConfig {
    pub fn parse(text: &str) -> Result<Self> {
        Ok(serde_json::from_str(text)?)
    }

    /// A required numeric field.
    pub fn require(&self, value: Option<usize>, name: &str) -> Result<usize> {
        value.with_context(|| format!("config.json lacks `{name}`"))
    }

    /// Rope parameters for layers of `layer_type` (`full_attention`,
    /// `sliding_attention`), from either config layout.
    pub fn rope_for(&self, layer_type: &str) -> Result<RopeConfig> {
        let context = RopeContext {
            theta: self.rope_theta,
            partial_rotary_factor: self.partial_rotary_factor,
            original_max_position_embeddings: self.original_max_position_embeddings,
            max_position_embeddings: self.max_position_embeddings,
        };
        match &self.rope_parameters {
            Some(params) if params.get(layer_type).is_some_and(Value::is_object) => {
                RopeConfig::from_json(params.get(layer_type), context)
            }
            Some(params) => RopeConfig::from_json(Some(params), context),
            None => RopeConfig::from_json(
                self.rope_scaling.as_ref(),
                RopeContext { theta: self.rope_theta.or(Some(10_000.0)), ..context },
            ),
        }
    }

    /// How the weights are quantized (`quantization_config.quant_method`,
    /// lowercase: "fp8", "gptq", "awq", "bitsandbytes", …), if they are.
    pub fn quantization_method(&self) -> Option<String> {
        let config = self.quantization_config.as_ref().filter(|c| !c.is_null())?;
        Some(match config.get("quant_method").and_then(Value::as_str) {
            Some(method) => method.to_lowercase(),
            None => "unnamed".to_string(),
        })
    }

    /// Refuses a checkpoint whose weights are quantized in a way the engine
    /// cannot run, naming the method, before any weight is read. FP8
    /// (`fp8`: F8E4M3 weights with `weight_scale_inv`) runs.
    pub fn require_runnable_quantization(&self) -> Result<()> {
        match self.quantization_method().as_deref() {
            None | Some("fp8") => Ok(()),
            Some(method) => bail!("{}", quantization_refusal(method)),
        }
    }

    /// `quantization_config.weight_block_size` of an FP8 checkpoint.
    pub fn fp8_block_size(&self) -> Result<Option<(usize, usize)>> {
        let Some(block) =
            self.quantization_config.as_ref().and_then(|c| c.get("weight_block_size")).filter(|b| !b.is_null())
        else {
            return Ok(None);
        };
        match block.as_array().map(|b| b.iter().map(Value::as_u64).collect::<Vec<_>>()).as_deref() {
            Some(&[Some(rows), Some(cols)]) if rows > 0 && cols > 0 => Ok(Some((rows as usize, cols as usize))),
            _ => bail!("config.json: `quantization_config.weight_block_size` {block} is not two positive integers"),
        }
    }

    /// The gated MLP's activation (`hidden_act`, or Gemma's `hidden_activation`).
    pub fn activation(&self) -> Result<Activation> {
        match self.hidden_activation.as_deref().or(self.hidden_act.as_deref()) {
            None | Some("silu") | Some("swish") => Ok(Activation::Silu),
            Some("gelu_pytorch_tanh") => Ok(Activation::GeluTanh),
            Some(other) => {
                bail!("config.json: activation `{other}` is not supported (supported: silu, gelu_pytorch_tanh)")
            }
        }
    }
}

/// Why a checkpoint quantized with `method` cannot load.
fn quantization_refusal(method: &str) -> String {
    format!(
        "config.json: the weights are quantized with `{method}` (quantization_config.quant_method), which Cake cannot run; \
         use an unquantized (f32, f16, bf16) or fp8 copy, or a GGUF file"
    )
}

/// Reads a token id or list of ids (`eos_token_id` may be either).
pub fn token_ids(value: Option<&Value>) -> Vec<u32> {
    match value {
        Some(Value::Number(n)) => n.as_u64().map(|v| vec![v as u32]).unwrap_or_default(),
        Some(Value::Array(items)) => items.iter().filter_map(Value::as_u64).map(|v| v as u32).collect(),
        _ => Vec::new(),
    }
}
