//! A text model ready to use: decoder, tokenizer, chat template, stop tokens.
//!
//! [`TextModel::load`] takes a Hugging Face model folder or a single GGUF
//! file and detects everything else: the architecture, the stored dtype, the
//! tokenizer, the chat template and the end-of-sequence ids.

use super::chat_template::ChatTemplate;
use super::sampling::{SamplingOverrides, SamplingParams};
use super::tokenizer::TextTokenizer;
use crate::cluster::remote::RemoteWorker;
use crate::models::decoder::{Decoder, LogitsFor};
use crate::models::loader::Checkpoint;
use crate::models::nn::kv_cache::KvCache;
pub use crate::models::loader::LoadOptions;
use anyhow::{bail, Context, Result};
use candle_core::Tensor;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Layers that run on another machine, after the local ones.
pub struct RemoteStage {
    pub worker: Arc<RemoteWorker>,
    pub layers: Range<usize>,
}

/// One sequence being processed: the local KV cache, and the id under which
/// workers keep theirs.
pub struct Session {
    pub cache: KvCache,
    pub sequence: u64,
}

pub struct TextModel {
    pub path: PathBuf,
    /// The local part: embedding, the first layers (all of them on a single
    /// machine), final norm and LM head.
    pub decoder: Decoder,
    /// Later layers on workers, in pipeline order (empty on a single machine).
    pub remote_stages: Vec<RemoteStage>,
    pub tokenizer: Option<TextTokenizer>,
    /// Raw Jinja source of the model's chat template, if it has one.
    pub chat_template_source: Option<String>,
    /// Every token id that ends generation.
    pub eos_token_ids: Vec<u32>,
    /// Sampling settings used when a request chooses none (from
    /// `generation_config.json` where the model has one).
    pub sampling_defaults: SamplingParams,
    /// Time spent in the local layers, in nanoseconds (for the cluster view).
    pub local_nanos: Arc<AtomicU64>,
}

impl TextModel {
    /// Loads a model folder or a `.gguf` file.
    pub fn load(path: &Path, options: &LoadOptions) -> Result<Self> {
        Self::load_with_progress(path, options, &mut |_, _| {})
    }

    /// Like [`Self::load`], calling `on_layer(done, total)` as layers load.
    pub fn load_with_progress(
        path: &Path,
        options: &LoadOptions,
        on_layer: &mut dyn FnMut(usize, usize),
    ) -> Result<Self> {
        let checkpoint = Checkpoint::open(path)?;
        let decoder = checkpoint.load_decoder_with_progress(None, options, on_layer)?;
        Self::assemble(path, &checkpoint, decoder, Vec::new())
    }

    /// A model from a loaded local part and the stages on workers; reads the
    /// tokenizer, chat template and stop tokens from the checkpoint.
    pub fn assemble(path: &Path, checkpoint: &Checkpoint, decoder: Decoder, remote_stages: Vec<RemoteStage>) -> Result<Self> {
        let mut eos = checkpoint.config().eos_token_ids.clone();
        let mut sampling_defaults = SamplingParams::default();
        let (tokenizer, chat_template_source) = match &checkpoint {
            Checkpoint::Folder { dir, .. } => {
                if let Some(generation) = read_json(&dir.join("generation_config.json"))? {
                    eos.extend(crate::models::config::token_ids(generation.get("eos_token_id")));
                    sampling_defaults =
                        SamplingOverrides::from_generation_config(&generation).apply_to(&sampling_defaults);
                }
                folder_text_files(dir)?
            }
            Checkpoint::Gguf { file, .. } => (
                Some(TextTokenizer::from_gguf(file)?),
                file.get_str("tokenizer.chat_template").map(str::to_string),
            ),
        };
        if let Some(id) = tokenizer
            .as_ref()
            .and_then(|t| t.eos_token.as_deref().and_then(|name| t.token_id(name)))
        {
            eos.push(id);
        }
        eos.sort_unstable();
        eos.dedup();
        Ok(Self {
            path: path.to_path_buf(),
            decoder,
            remote_stages,
            tokenizer,
            chat_template_source,
            eos_token_ids: eos,
            sampling_defaults,
            local_nanos: Arc::default(),
        })
    }

    /// Bytes exchanged with workers so far (0 on a single machine).
    pub fn network_bytes(&self) -> u64 {
        self.remote_stages.iter().map(|s| {
            let (sent, received) = s.worker.traffic();
            sent + received
        }).sum()
    }

    /// A new sequence with empty caches.
    pub fn new_session(&self) -> Session {
        Session {
            cache: self.decoder.new_cache(),
            sequence: rand::random(),
        }
    }

    /// Frees the workers' caches of a finished sequence.
    pub fn end_session(&self, session: Session) {
        for stage in &self.remote_stages {
            // A worker that is gone has nothing left to free.
            let _ = stage.worker.forget(session.sequence);
        }
    }

    /// Hidden states after every layer, local and remote, for `tokens`
    /// appended to the session.
    pub fn hidden_states(&self, tokens: &[u32], session: &mut Session) -> Result<Tensor> {
        if tokens.is_empty() {
            bail!("no tokens to run");
        }
        let started = std::time::Instant::now();
        let mut hidden = self.decoder.forward_layers(&self.decoder.embed(tokens)?, &mut session.cache)?;
        self.local_nanos.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
        for stage in &self.remote_stages {
            hidden = stage.worker.forward(session.sequence, &hidden)?;
        }
        Ok(hidden)
    }

    /// f32 logits for `tokens` appended to the session.
    pub fn forward(&self, tokens: &[u32], session: &mut Session, which: LogitsFor) -> Result<Tensor> {
        let hidden = self.hidden_states(tokens, session)?;
        self.decoder.logits(&hidden, which)
    }

    /// The tokenizer, or an error saying the model has none.
    pub fn tokenizer(&self) -> Result<&TextTokenizer> {
        self.tokenizer
            .as_ref()
            .with_context(|| format!("{}: the model has no tokenizer", self.path.display()))
    }

    /// The model's chat template (ChatML when it has none).
    pub fn chat_template(&self) -> Result<ChatTemplate> {
        let tok = self.tokenizer.as_ref();
        ChatTemplate::new(
            self.chat_template_source.as_deref(),
            tok.and_then(|t| t.bos_token.as_deref()),
            tok.and_then(|t| t.eos_token.as_deref()),
        )
    }
}

fn read_json(path: &Path) -> Result<Option<serde_json::Value>> {
    if !path.exists() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let value = serde_json::from_str(&text).with_context(|| format!("{}: not valid JSON", path.display()))?;
    Ok(Some(value))
}

/// Tokenizer and chat template of a model folder.
fn folder_text_files(dir: &Path) -> Result<(Option<TextTokenizer>, Option<String>)> {
    let tokenizer = if dir.join("tokenizer.json").exists() {
        Some(TextTokenizer::from_folder(dir)?)
    } else {
        None
    };
    let tokenizer_config = read_json(&dir.join("tokenizer_config.json"))?;
    let chat_template = match std::fs::read_to_string(dir.join("chat_template.jinja")) {
        Ok(source) => Some(source),
        Err(_) => tokenizer_config.as_ref().and_then(chat_template_from_config),
    };
    Ok((tokenizer, chat_template))
}

/// `chat_template` as a string, or the `default` entry of a list of named templates.
fn chat_template_from_config(config: &serde_json::Value) -> Option<String> {
    match config.get("chat_template")? {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Array(items) => items
            .iter()
            .find(|t| t.get("name").and_then(|n| n.as_str()) == Some("default"))
            .and_then(|t| t.get("template")?.as_str().map(str::to_string)),
        _ => None,
    }
}
