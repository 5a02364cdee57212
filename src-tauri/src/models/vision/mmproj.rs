//! llama.cpp's `mmproj` files: a vision-language model's picture reader
//! (its vision tower and projector) in a GGUF file of its own, published
//! beside the text model's GGUF files (`convert_hf_to_gguf.py --mmproj`).
//! The `clip.*` metadata gives the tower's shape; tensors are read under
//! the names transformers gives them, with what the converter changed
//! undone.

use super::siglip::SiglipConfig;
use crate::formats::gguf::{qtensor_from_bytes, value_to_f64, GgufFile, Value};
use anyhow::{bail, Context, Result};
use candle_core::{Device, Tensor};
use std::path::{Path, PathBuf};

/// An opened mmproj file holding a vision encoder.
pub struct Mmproj {
    file: GgufFile,
}

impl Mmproj {
    /// Opens `path`, refusing a GGUF file that is not a picture reader.
    pub fn open(path: &Path) -> Result<Self> {
        let file = GgufFile::open(path)?;
        let architecture = file.get_str("general.architecture").unwrap_or("none");
        if architecture != "clip" {
            bail!("{}: not a picture reader (mmproj) file: its architecture is `{architecture}`", path.display());
        }
        if !matches!(file.get("clip.has_vision_encoder"), Some(Value::Bool(true))) {
            bail!("{}: this mmproj file holds no vision encoder", path.display());
        }
        Ok(Self { file })
    }

    pub fn path(&self) -> &Path {
        &self.file.path
    }

    /// The bytes its tensors take in the file.
    pub fn stored_bytes(&self) -> u64 {
        self.file.header.tensor_infos.values().map(|t| t.byte_size()).sum()
    }

    /// What its projector is (`gemma3`, `idefics3`, `qwen2.5vl` …): files
    /// that also hold an audio encoder name the vision one's apart.
    pub fn projector(&self) -> &str {
        let named =
            self.file.get_str("clip.vision.projector_type").or_else(|| self.file.get_str("clip.projector_type"));
        named.unwrap_or("unnamed")
    }

    /// The width of the tokens it makes (the text model's).
    pub fn output_width(&self) -> Result<usize> {
        self.file.require_usize("clip.vision.projection_dim")
    }

    /// An integer of its `clip.vision.*` metadata, if present.
    pub fn vision_usize(&self, key: &str) -> Result<Option<usize>> {
        let key = format!("clip.vision.{key}");
        match self.file.get(&key) {
            None => Ok(None),
            Some(_) => self.file.require_usize(&key).map(Some),
        }
    }

    /// The three per-channel values of `clip.vision.{key}` (the pictures'
    /// mean or standard deviation), if present.
    pub fn channel_values(&self, key: &str) -> Result<Option<[f32; 3]>> {
        let key = format!("clip.vision.{key}");
        let Some(value) = self.file.get(&key) else { return Ok(None) };
        let values: Option<Vec<f32>> = match value {
            Value::Array(items) => items.iter().map(|v| value_to_f64(v).map(|v| v as f32)).collect(),
            _ => None,
        };
        match values.as_deref() {
            Some(&[r, g, b]) => Ok(Some([r, g, b])),
            _ => bail!("{}: `{key}` is not three numbers", self.path().display()),
        }
    }

    /// The SigLIP tower's shape.
    pub fn siglip_config(&self) -> Result<SiglipConfig> {
        let need = |key: &str| -> Result<usize> { self.file.require_usize(&format!("clip.vision.{key}")) };
        Ok(SiglipConfig {
            hidden_size: need("embedding_length")?,
            intermediate_size: need("feed_forward_length")?,
            num_hidden_layers: need("block_count")?,
            num_attention_heads: need("attention.head_count")?,
            image_size: need("image_size")?,
            patch_size: need("patch_size")?,
            layer_norm_eps: self.file.get_f64("clip.vision.attention.layer_norm_epsilon")?.unwrap_or(1e-6),
        })
    }

    /// The tensor transformers calls `name`, in f32.
    pub fn load(&self, name: &str) -> Result<Tensor> {
        let origin = || self.path().display().to_string();
        let stored =
            stored_name(name).with_context(|| format!("{}: no mmproj tensor stands for `{name}`", origin()))?;
        let info =
            self.file.tensor_info(&stored).with_context(|| format!("{}: tensor `{stored}` is missing", origin()))?;
        let bytes = self.file.tensor_bytes(&stored)?;
        let tensor = qtensor_from_bytes(info.ggml_type, bytes, &info.dims, &Device::Cpu)
            .and_then(|q| Ok(q.dequantize(&Device::Cpu)?))
            .with_context(|| format!("{}: tensor `{stored}`", origin()))?;
        // The converter stores Gemma 3's soft-token norm with its 1 added.
        if stored == "mm.soft_emb_norm.weight" {
            return Ok((tensor - 1.0)?);
        }
        Ok(tensor)
    }
}

/// The name llama.cpp's converter gives the tensor transformers calls
/// `name` (the vision tower's under any prefix ending in `vision_model.`).
fn stored_name(name: &str) -> Option<String> {
    match name {
        "multi_modal_projector.mm_input_projection_weight" => return Some("mm.input_projection.weight".into()),
        "multi_modal_projector.mm_soft_emb_norm.weight" => return Some("mm.soft_emb_norm.weight".into()),
        "model.connector.modality_projection.proj.weight" => return Some("mm.model.fc.weight".into()),
        _ => {}
    }
    let (_, inside) = name.split_once("vision_model.")?;
    let (module, kind) = inside.rsplit_once('.')?;
    if !matches!(kind, "weight" | "bias") {
        return None;
    }
    let stored = match module {
        "embeddings.patch_embedding" => "v.patch_embd".to_string(),
        "embeddings.position_embedding" => "v.position_embd".to_string(),
        "post_layernorm" => "v.post_ln".to_string(),
        _ => {
            let rest = module.strip_prefix("encoder.layers.")?;
            let (layer, part) = rest.split_once('.')?;
            let layer: usize = layer.parse().ok()?;
            let part = match part {
                "self_attn.q_proj" => "attn_q",
                "self_attn.k_proj" => "attn_k",
                "self_attn.v_proj" => "attn_v",
                "self_attn.out_proj" => "attn_out",
                "layer_norm1" => "ln1",
                "layer_norm2" => "ln2",
                "mlp.fc1" => "ffn_up",
                "mlp.fc2" => "ffn_down",
                _ => return None,
            };
            format!("v.blk.{layer}.{part}")
        }
    };
    Some(format!("{stored}.{kind}"))
}

/// Whether a file's name marks it as a picture reader (llama.cpp's
/// converter writes `mmproj-…`; repositories keep the word).
pub fn is_mmproj_name(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    name.contains("mmproj") && name.ends_with(".gguf")
}

/// The mmproj files in the folder of the text GGUF `text_file`, the most
/// precise by its name first (F32, F16, BF16, then the rest).
pub fn files_beside(text_file: &Path) -> Vec<PathBuf> {
    let Some(Ok(entries)) = text_file.parent().map(std::fs::read_dir) else { return Vec::new() };
    let mut found: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok())
        .map(|entry| entry.path())
        .filter(|path| path.file_name().and_then(|n| n.to_str()).is_some_and(is_mmproj_name) && path.is_file())
        .collect();
    found.sort_by_key(|path| (precision_rank(&path.to_string_lossy()), path.clone()));
    found
}

/// The picture reader published beside the text GGUF `text_file` whose
/// tokens are `text_width` wide: of the mmproj files of its folder, the
/// first (see [`files_beside`]) that makes tokens that wide with a
/// projector Cake reads (`reads(projector)`), opened. `None` when the
/// folder holds no mmproj file; an error saying why the first one cannot
/// serve when none can.
pub fn beside(text_file: &Path, text_width: usize, reads: impl Fn(&str) -> bool) -> Result<Option<Mmproj>> {
    let serves = |path: &Path| -> Result<Mmproj> {
        let mmproj = Mmproj::open(path)?;
        let (projector, width) = (mmproj.projector(), mmproj.output_width()?);
        if !reads(projector) {
            bail!("{}: Cake does not read `{projector}` picture readers yet", path.display());
        }
        if width != text_width {
            bail!("{}: makes tokens {width} wide for a text model {text_width} wide", path.display());
        }
        Ok(mmproj)
    };
    let mut first_failure = None;
    for path in files_beside(text_file) {
        match serves(&path) {
            Ok(mmproj) => return Ok(Some(mmproj)),
            Err(error) => first_failure = first_failure.or(Some(error)),
        }
    }
    first_failure.map_or(Ok(None), Err)
}

/// Of a repository's files `names`, the mmproj file to fetch with a model:
/// the most precise (F32, F16, BF16, then the rest, as [`beside`] prefers).
pub fn preferred<'n>(names: impl IntoIterator<Item = &'n str>) -> Option<&'n str> {
    names.into_iter().filter(|name| is_mmproj_name(name)).min_by_key(|name| (precision_rank(name), *name))
}

/// The order mmproj files are preferred in, by the type their name gives.
fn precision_rank(name: &str) -> usize {
    let name = name.rsplit('/').next().unwrap_or(name).to_ascii_uppercase();
    // BF16 first: its name holds "F16" too.
    match () {
        _ if name.contains("BF16") => 2,
        _ if name.contains("F32") => 0,
        _ if name.contains("F16") => 1,
        _ => 3,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transformers_names_become_the_converters() {
        let cases = [
            ("vision_tower.vision_model.embeddings.patch_embedding.weight", "v.patch_embd.weight"),
            ("model.vision_model.embeddings.position_embedding.weight", "v.position_embd.weight"),
            ("vision_tower.vision_model.encoder.layers.11.self_attn.out_proj.bias", "v.blk.11.attn_out.bias"),
            ("vision_tower.vision_model.encoder.layers.0.mlp.fc1.weight", "v.blk.0.ffn_up.weight"),
            ("vision_tower.vision_model.encoder.layers.3.layer_norm2.bias", "v.blk.3.ln2.bias"),
            ("model.connector.modality_projection.proj.weight", "mm.model.fc.weight"),
            ("vision_tower.vision_model.post_layernorm.weight", "v.post_ln.weight"),
            ("multi_modal_projector.mm_input_projection_weight", "mm.input_projection.weight"),
        ];
        for (name, stored) in cases {
            assert_eq!(stored_name(name).as_deref(), Some(stored), "{name}");
        }
        assert_eq!(stored_name("vision_tower.vision_model.encoder.layers.x.mlp.fc1.weight"), None);
        assert_eq!(stored_name("language_model.model.embed_tokens.weight"), None);
    }

    #[test]
    fn mmproj_files_are_told_by_name() {
        assert!(is_mmproj_name("mmproj-google_gemma-3-4b-it-f16.gguf"));
        assert!(is_mmproj_name("gemma-3-4b-it-MMPROJ-F16.GGUF"));
        assert!(!is_mmproj_name("gemma-3-4b-it-Q4_K_M.gguf"));
        assert!(!is_mmproj_name("mmproj-notes.txt"));
        let rank = precision_rank;
        assert!(rank("mmproj-F32.gguf") < rank("mmproj-F16.gguf"));
        assert!(rank("mmproj-model-f16.gguf") < rank("mmproj-BF16.gguf"));
        assert!(rank("mmproj-BF16.gguf") < rank("mmproj-Q8_0.gguf"));
        let names = ["gemma-3-4b-it-Q4_K_M.gguf", "mmproj-Q8_0.gguf", "mmproj-BF16.gguf", "mmproj-F16.gguf"];
        assert_eq!(preferred(names), Some("mmproj-F16.gguf"));
        assert_eq!(preferred(["gemma-3-4b-it-Q4_K_M.gguf"]), None);
    }
}
