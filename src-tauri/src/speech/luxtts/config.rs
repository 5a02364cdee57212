//! LuxTTS's `config.json`: `{"model": ZipVoice's keyword arguments,
//! "feature": {"sampling_rate": …}}` (docs/luxtts-research.md), turned into the
//! shapes of the two Zipformers. Values outside what the model can be are
//! refused by name before anything is allocated.

use anyhow::{bail, Context, Result};
use serde::Deserialize;
use std::path::Path;

/// The largest width, head count or kernel any field may ask for: far
/// above the released model's, far below a size that could exhaust memory.
const MAX_DIM: usize = 1 << 14;
/// The most layers in one stack.
const MAX_LAYERS: usize = 64;

/// An `int` or a list of them: ZipVoice repeats a single value per stack.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum PerStack {
    One(usize),
    Each(Vec<usize>),
}

impl PerStack {
    fn per_stack(&self, stacks: usize, field: &str) -> Result<Vec<usize>> {
        match self {
            Self::One(value) => Ok(vec![*value; stacks]),
            Self::Each(values) if values.len() == 1 => Ok(vec![values[0]; stacks]),
            Self::Each(values) if values.len() == stacks => Ok(values.clone()),
            Self::Each(values) => bail!("`{field}` has {} values for {stacks} stacks", values.len()),
        }
    }
}

/// The `model` section, with ZipVoice's defaults for what it may omit.
#[derive(Debug, Clone, Deserialize)]
struct RawModel {
    fm_decoder_downsampling_factor: Vec<usize>,
    fm_decoder_num_layers: PerStack,
    fm_decoder_cnn_module_kernel: PerStack,
    fm_decoder_feedforward_dim: usize,
    fm_decoder_num_heads: usize,
    fm_decoder_dim: usize,
    #[serde(default = "defaults::text_layers")]
    text_encoder_num_layers: usize,
    #[serde(default = "defaults::text_feedforward")]
    text_encoder_feedforward_dim: usize,
    #[serde(default = "defaults::text_kernel")]
    text_encoder_cnn_module_kernel: usize,
    #[serde(default = "defaults::text_heads")]
    text_encoder_num_heads: usize,
    #[serde(default = "defaults::text_dim")]
    text_encoder_dim: usize,
    time_embed_dim: usize,
    #[serde(default = "defaults::text_dim")]
    text_embed_dim: usize,
    query_head_dim: usize,
    value_head_dim: usize,
    pos_head_dim: usize,
    pos_dim: usize,
    feat_dim: usize,
}

/// ZipVoice's constructor defaults.
mod defaults {
    pub fn text_layers() -> usize {
        4
    }
    pub fn text_feedforward() -> usize {
        512
    }
    pub fn text_kernel() -> usize {
        9
    }
    pub fn text_heads() -> usize {
        4
    }
    pub fn text_dim() -> usize {
        192
    }
}

#[derive(Debug, Clone, Deserialize)]
struct RawFeature {
    sampling_rate: u32,
}

#[derive(Debug, Clone, Deserialize)]
struct RawConfig {
    model: RawModel,
    feature: RawFeature,
}

/// One stack of a Zipformer: `layers` layers run at `1/downsample` of the
/// frame rate, their convolutions `kernel` wide.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StackShape {
    pub downsample: usize,
    pub layers: usize,
    pub kernel: usize,
}

/// Everything that fixes a Zipformer's tensor shapes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZipformerShape {
    pub in_dim: usize,
    pub out_dim: usize,
    pub dim: usize,
    pub feedforward: usize,
    pub heads: usize,
    pub query_head_dim: usize,
    pub value_head_dim: usize,
    pub pos_head_dim: usize,
    pub pos_dim: usize,
    pub stacks: Vec<StackShape>,
    /// The width of the time embedding, for the decoder (None: the text
    /// encoder, which sees no time).
    pub time_embed_dim: Option<usize>,
    /// Whether the guidance scale is embedded and added to the time's.
    pub guidance_embed: bool,
}

/// The acoustic model's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LuxConfig {
    pub feat_dim: usize,
    pub text_embed_dim: usize,
    pub text_encoder: ZipformerShape,
    pub fm_decoder: ZipformerShape,
    /// Of the audio the features describe (24 000 Hz).
    pub sampling_rate: u32,
}

impl LuxConfig {
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
        Self::parse(&text).with_context(|| format!("{}: not a LuxTTS configuration", path.display()))
    }

    pub fn parse(text: &str) -> Result<Self> {
        let raw: RawConfig = serde_json::from_str(text)?;
        let m = &raw.model;
        check_u_net(&m.fm_decoder_downsampling_factor)?;
        let stacks = m.fm_decoder_downsampling_factor.len();
        let layers = m.fm_decoder_num_layers.per_stack(stacks, "fm_decoder_num_layers")?;
        let kernels = m.fm_decoder_cnn_module_kernel.per_stack(stacks, "fm_decoder_cnn_module_kernel")?;
        let fm_stacks = (0..stacks)
            .map(|i| StackShape {
                downsample: m.fm_decoder_downsampling_factor[i],
                layers: layers[i],
                kernel: kernels[i],
            })
            .collect();
        let shared = |dim, feedforward, heads, stacks, in_dim, time_embed_dim, guidance_embed| ZipformerShape {
            in_dim,
            out_dim: m.feat_dim,
            dim,
            feedforward,
            heads,
            query_head_dim: m.query_head_dim,
            value_head_dim: m.value_head_dim,
            pos_head_dim: m.pos_head_dim,
            pos_dim: m.pos_dim,
            stacks,
            time_embed_dim,
            guidance_embed,
        };
        let text_stack =
            StackShape { downsample: 1, layers: m.text_encoder_num_layers, kernel: m.text_encoder_cnn_module_kernel };
        let config = Self {
            feat_dim: m.feat_dim,
            text_embed_dim: m.text_embed_dim,
            text_encoder: shared(
                m.text_encoder_dim,
                m.text_encoder_feedforward_dim,
                m.text_encoder_num_heads,
                vec![text_stack],
                m.text_embed_dim,
                None,
                false,
            ),
            fm_decoder: shared(
                m.fm_decoder_dim,
                m.fm_decoder_feedforward_dim,
                m.fm_decoder_num_heads,
                fm_stacks,
                3 * m.feat_dim,
                Some(m.time_embed_dim),
                true,
            ),
            sampling_rate: raw.feature.sampling_rate,
        };
        config.check()?;
        Ok(config)
    }

    fn check(&self) -> Result<()> {
        let fields = [
            ("feat_dim", self.feat_dim),
            ("text_embed_dim", self.text_embed_dim),
            ("time_embed_dim", self.fm_decoder.time_embed_dim.unwrap_or(1)),
        ];
        for (name, value) in fields {
            in_range(name, value, MAX_DIM)?;
        }
        for (part, shape) in [("text_encoder", &self.text_encoder), ("fm_decoder", &self.fm_decoder)] {
            shape.check().with_context(|| format!("the {part}"))?;
        }
        if self.fm_decoder.time_embed_dim.is_some_and(|d| !d.is_multiple_of(2)) {
            bail!("time_embed_dim must be even");
        }
        if !(8_000..=192_000).contains(&self.sampling_rate) {
            bail!("feature.sampling_rate {} Hz is not an audio rate", self.sampling_rate);
        }
        Ok(())
    }
}

impl ZipformerShape {
    fn check(&self) -> Result<()> {
        let fields = [
            ("dim", self.dim),
            ("feedforward_dim", self.feedforward),
            ("num_heads", self.heads),
            ("query_head_dim", self.query_head_dim),
            ("value_head_dim", self.value_head_dim),
            ("pos_head_dim", self.pos_head_dim),
            ("pos_dim", self.pos_dim),
        ];
        for (name, value) in fields {
            in_range(name, value, MAX_DIM)?;
        }
        if !self.pos_dim.is_multiple_of(2) {
            bail!("pos_dim {} must be even", self.pos_dim);
        }
        for stack in &self.stacks {
            in_range("num_layers", stack.layers, MAX_LAYERS)?;
            in_range("cnn_module_kernel", stack.kernel, MAX_DIM)?;
            if stack.kernel.is_multiple_of(2) {
                bail!("cnn_module_kernel {} must be odd", stack.kernel);
            }
        }
        Ok(())
    }
}

/// Refuses `value` (a size named `name`) unless it is 1 to `max`.
pub(crate) fn in_range(name: &str, value: usize, max: usize) -> Result<()> {
    if value == 0 || value > max {
        bail!("`{name}` is {value}; 1 to {max} was expected");
    }
    Ok(())
}

/// ZipVoice's rule for the decoder's stacks: 1 at both ends, doubling to
/// the middle and halving after it.
fn check_u_net(factors: &[usize]) -> Result<()> {
    let n = factors.len();
    let doubling = (1..=n / 2).all(|i| factors[i] == 2 * factors[i - 1]);
    let halving = (n / 2 + 1..n).all(|i| 2 * factors[i] == factors[i - 1]);
    if n == 0 || n > 16 || factors[0] != 1 || factors[n - 1] != 1 || !doubling || !halving {
        bail!("fm_decoder_downsampling_factor {factors:?} is not of the form [1, 2, 4, …, 4, 2, 1]");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = r#"{"model": {"fm_decoder_downsampling_factor": [1, 2, 4, 2, 1],
        "fm_decoder_num_layers": [2, 2, 4, 4, 4], "fm_decoder_cnn_module_kernel": [31, 15, 7, 15, 31],
        "fm_decoder_feedforward_dim": 1536, "fm_decoder_num_heads": 4, "fm_decoder_dim": 512,
        "text_encoder_num_layers": 4, "text_encoder_feedforward_dim": 512, "text_encoder_cnn_module_kernel": 9,
        "text_encoder_num_heads": 4, "text_encoder_dim": 192, "time_embed_dim": 192, "text_embed_dim": 192,
        "query_head_dim": 32, "value_head_dim": 12, "pos_head_dim": 4, "pos_dim": 48, "feat_dim": 100},
        "feature": {"sampling_rate": 24000, "type": "vocos"}}"#;

    #[test]
    fn the_base_configuration_gives_the_released_shapes() {
        let config = LuxConfig::parse(BASE).unwrap();
        assert_eq!(config.fm_decoder.in_dim, 300);
        assert_eq!(config.fm_decoder.stacks[2], StackShape { downsample: 4, layers: 4, kernel: 7 });
        assert_eq!(config.text_encoder.stacks, vec![StackShape { downsample: 1, layers: 4, kernel: 9 }]);
        assert_eq!(config.text_encoder.time_embed_dim, None);
    }

    #[test]
    fn shapes_a_model_cannot_have_are_refused_by_name() {
        let cases = [
            ("[1, 2, 4, 2, 1]", "[1, 2, 2, 2, 1]", "not of the form"),
            ("\"fm_decoder_num_layers\": [2, 2, 4, 4, 4]", "\"fm_decoder_num_layers\": [2, 2]", "2 values for 5"),
            ("\"pos_dim\": 48", "\"pos_dim\": 47", "pos_dim 47 must be even"),
            ("\"fm_decoder_dim\": 512", "\"fm_decoder_dim\": 99999999", "`dim` is 99999999"),
            ("[31, 15, 7, 15, 31]", "[31, 15, 8, 15, 31]", "must be odd"),
        ];
        for (from, to, message) in cases {
            let error = LuxConfig::parse(&BASE.replace(from, to)).unwrap_err();
            assert!(format!("{error:#}").contains(message), "{to}: {error:#}");
        }
    }
}
