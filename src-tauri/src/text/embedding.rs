//! Embeddings: one vector per text from a model made for them.
//!
//! An embedding model says how its last hidden states (after the final
//! norm) become one vector: sentence-transformers' `modules.json` names a
//! Pooling module whose `config.json` picks the last token (Qwen3-Embedding),
//! the mean of all tokens or the first (BERT-style families), and a
//! Normalize module scales the vector to length 1; a GGUF file says the
//! same in `<arch>.pooling_type` (llama.cpp's numbering). A chat model
//! says nothing and has no embeddings.

use super::model::TextModel;
use crate::formats::gguf::GgufFile;
use crate::models::context::PREFILL_CHUNK;
use anyhow::{bail, Context, Result};
use candle_core::{DType, Tensor, D};
use std::path::Path;

/// Which hidden states make the vector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pooling {
    /// The last token's (Qwen3-Embedding).
    LastToken,
    /// The mean over all tokens.
    Mean,
    /// The first token's.
    First,
}

/// How a model makes embeddings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EmbeddingSpec {
    pub pooling: Pooling,
    /// Scale the vector to length 1.
    pub normalize: bool,
}

impl EmbeddingSpec {
    /// What a model folder's sentence-transformers files say, if it has them.
    pub fn of_folder(dir: &Path) -> Result<Option<Self>> {
        let modules_path = dir.join("modules.json");
        let Ok(text) = std::fs::read_to_string(&modules_path) else { return Ok(None) };
        let modules: Vec<serde_json::Value> = serde_json::from_str(&text)
            .with_context(|| format!("{}: not a list of modules", modules_path.display()))?;
        let kind = |m: &serde_json::Value, name: &str| m["type"].as_str().is_some_and(|t| t.ends_with(name));
        let Some(pooling_module) = modules.iter().find(|m| kind(m, ".Pooling")) else { return Ok(None) };
        let config_path = dir.join(pooling_module["path"].as_str().unwrap_or("1_Pooling")).join("config.json");
        let config: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(&config_path).with_context(|| format!("cannot read {}", config_path.display()))?,
        )
        .with_context(|| format!("{}: not valid JSON", config_path.display()))?;
        let on = |key: &str| config[key].as_bool() == Some(true);
        let pooling = if on("pooling_mode_lasttoken") {
            Pooling::LastToken
        } else if on("pooling_mode_mean_tokens") {
            Pooling::Mean
        } else if on("pooling_mode_cls_token") {
            Pooling::First
        } else {
            bail!("{}: a pooling mode Cake does not compute (last token, mean or first only)", config_path.display());
        };
        Ok(Some(Self { pooling, normalize: modules.iter().any(|m| kind(m, ".Normalize")) }))
    }

    /// What the GGUF `file`'s `{architecture}.pooling_type` says.
    pub fn of_gguf_file(file: &GgufFile) -> Result<Option<Self>> {
        let arch = file.get_str("general.architecture").unwrap_or_default();
        Ok(Self::of_gguf(file.get_f64(&format!("{arch}.pooling_type"))?))
    }

    /// What a GGUF file's `pooling_type` says (llama.cpp: 1 mean, 2 first,
    /// 3 last; 0 or absent: no embeddings). llama.cpp normalizes them.
    pub fn of_gguf(pooling_type: Option<f64>) -> Option<Self> {
        let pooling = match pooling_type? as u32 {
            1 => Pooling::Mean,
            2 => Pooling::First,
            3 => Pooling::LastToken,
            _ => return None,
        };
        Some(Self { pooling, normalize: true })
    }
}

/// The vector of `tokens` on `model`, read in chunks like a prompt.
pub fn embed(model: &TextModel, spec: EmbeddingSpec, tokens: &[u32]) -> Result<Vec<f32>> {
    if tokens.is_empty() {
        bail!("nothing to embed: the text has no tokens");
    }
    let mut session = model.new_session();
    let pooled = (|| -> Result<Tensor> {
        let mut pooled: Option<Tensor> = None;
        for (index, chunk) in tokens.chunks(PREFILL_CHUNK).enumerate() {
            let hidden = model.hidden_states(chunk, &mut session)?;
            let normed = model.decoder().final_norm(&hidden)?.squeeze(0)?.to_dtype(DType::F32)?;
            pooled = Some(match spec.pooling {
                Pooling::LastToken => normed.get(chunk.len() - 1)?,
                Pooling::First if index == 0 => normed.get(0)?,
                Pooling::First => pooled.context("the first chunk was pooled")?,
                Pooling::Mean => {
                    let sum = normed.sum(0)?;
                    match pooled {
                        Some(before) => (before + sum)?,
                        None => sum,
                    }
                }
            });
        }
        let pooled = pooled.context("no chunk was read")?;
        Ok(match spec.pooling {
            Pooling::Mean => (pooled / tokens.len() as f64)?,
            _ => pooled,
        })
    })();
    model.end_session(session);
    let pooled = pooled?;
    let pooled = if spec.normalize {
        let norm = pooled.sqr()?.sum_keepdim(D::Minus1)?.sqrt()?.maximum(1e-12)?;
        pooled.broadcast_div(&norm)?
    } else {
        pooled
    };
    Ok(pooled.to_vec1::<f32>()?)
}
