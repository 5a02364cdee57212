//! A text model ready to use: decoder, tokenizer, chat template, stop tokens.
//!
//! [`TextModel::load`] takes a Hugging Face model folder or a single GGUF
//! file and detects everything else: the architecture, the stored dtype, the
//! tokenizer, the chat template and the end-of-sequence ids.

use super::chat_template::{fallback_template, ChatTemplate};
use super::constraint::ConstraintCompiler;
use super::embedding::EmbeddingSpec;
use super::pictures::{self, PictureMemo, PromptPicture};
use super::sampling::{SamplingOverrides, SamplingParams};
use super::tokenizer::TextTokenizer;
use crate::models::context::PREFILL_CHUNK;
use crate::models::decoder::{Decoder, LogitsFor};
use crate::models::loader::Checkpoint;
pub use crate::models::loader::LoadOptions;
pub use crate::models::pipeline::{LayerPipeline, RemoteStage, Session};
use crate::models::vision::mmproj::Mmproj;
use crate::models::vision::{PictureVocabulary, VisionModel};
use anyhow::{bail, Context, Result};
use candle_core::Tensor;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

pub struct TextModel {
    pub path: PathBuf,
    /// The decoder: here, or split over this machine and workers.
    pub pipeline: LayerPipeline,
    pub tokenizer: Option<TextTokenizer>,
    /// Raw Jinja source of the model's chat template, if it has one.
    pub chat_template_source: Option<String>,
    /// Every token id that ends generation.
    pub eos_token_ids: Vec<u32>,
    /// Sampling settings used when a request chooses none (from
    /// `generation_config.json` where the model has one).
    pub sampling_defaults: SamplingParams,
    /// How the model makes embeddings, when it is made for them.
    pub embedding: Option<EmbeddingSpec>,
    /// What reads the pictures of a prompt, for a model that takes them
    /// (see [`Self::vision`]).
    pub vision: Option<VisionModel>,
    /// Why a model with a vision part cannot read pictures (its tower did
    /// not load): its text still works.
    pub vision_unusable: Option<String>,
    /// The soft tokens of the pictures read last.
    pub picture_memo: PictureMemo,
    /// Compiles output formats for this vocabulary; built on first use.
    constraint_compiler: OnceLock<Result<ConstraintCompiler, String>>,
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
        // The tokenizer (tens of milliseconds for a large vocabulary) is
        // read on another core while the weights load. Its temporaries are
        // given back as soon as it is built, not after the weights: held
        // until then, they raised the load's peak memory by about 12 MB.
        let (decoder, text) = std::thread::scope(|scope| {
            let text = scope.spawn(|| {
                let text = TextSide::read(&checkpoint, options.picture_reader.as_deref());
                release_freed_memory();
                text
            });
            let decoder = checkpoint.load_decoder_with_progress(None, options, on_layer);
            (decoder, text.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
        });
        // The file's metadata (a large vocabulary's strings) goes before the
        // trim, so that its memory is given back too.
        drop(checkpoint);
        release_freed_memory();
        Ok(Self::from_parts(path, LayerPipeline::new(decoder?, Vec::new()), text?))
    }

    /// A model from a loaded local part and the stages on workers; reads the
    /// tokenizer, chat template and stop tokens from the checkpoint (and the
    /// picture reader as `options` say).
    pub fn assemble(
        path: &Path,
        checkpoint: &Checkpoint,
        decoder: Decoder,
        remote_stages: Vec<RemoteStage>,
        options: &LoadOptions,
    ) -> Result<Self> {
        let text = TextSide::read(checkpoint, options.picture_reader.as_deref())?;
        Ok(Self::from_parts(path, LayerPipeline::new(decoder, remote_stages), text))
    }

    fn from_parts(path: &Path, pipeline: LayerPipeline, text: TextSide) -> Self {
        Self {
            path: path.to_path_buf(),
            pipeline,
            tokenizer: text.tokenizer,
            chat_template_source: text.chat_template_source,
            eos_token_ids: text.eos_token_ids,
            sampling_defaults: text.sampling_defaults,
            embedding: text.embedding,
            vision: text.vision,
            vision_unusable: text.vision_unusable,
            picture_memo: PictureMemo::default(),
            constraint_compiler: OnceLock::new(),
        }
    }

    /// What compiles output formats (JSON schemas, grammars) for this
    /// model's vocabulary, or why its replies cannot be constrained.
    pub fn constraint_compiler(&self) -> Result<&ConstraintCompiler> {
        let built = self.constraint_compiler.get_or_init(|| {
            let tokenizer = self.tokenizer().map_err(|e| format!("{e:#}"))?;
            let end = self.eos_token_ids.first().copied().ok_or("the model has no end-of-sequence token")?;
            ConstraintCompiler::new(tokenizer, end).map_err(|e| format!("{e:#}"))
        });
        built.as_ref().map_err(|e| anyhow::anyhow!("{}: {e}", self.path.display()))
    }

    /// The local part of the decoder (embedding, first layers, head).
    pub fn decoder(&self) -> &Decoder {
        &self.pipeline.decoder
    }

    /// A new sequence with empty caches.
    pub fn new_session(&self) -> Session {
        self.pipeline.new_session()
    }

    /// Frees the workers' caches of a finished sequence.
    pub fn end_session(&self, session: Session) {
        self.pipeline.end_session(session)
    }

    /// Hidden states after every layer, local and remote, for `tokens`
    /// appended to the session.
    pub fn hidden_states(&self, tokens: &[u32], session: &mut Session) -> Result<Tensor> {
        self.hidden_states_with(tokens, 0, &[], session)
    }

    /// Like [`Self::hidden_states`] for the prompt positions `first..` of
    /// a prompt holding `pictures`: the positions a picture holds get its
    /// embeddings.
    pub fn hidden_states_with(
        &self,
        tokens: &[u32],
        first: usize,
        pictures: &[PromptPicture],
        session: &mut Session,
    ) -> Result<Tensor> {
        if tokens.is_empty() {
            bail!("no tokens to run");
        }
        let embedded = self.decoder().embed(&pictures::embeddable(tokens, first, pictures))?;
        let embedded = pictures::place(embedded, first, pictures)?;
        let mutual = pictures::mutual_spans(pictures, first..first + tokens.len());
        self.pipeline.run_layers_seeing(&embedded, session, &mutual)
    }

    /// f32 logits for `tokens` appended to the session, read in pieces of
    /// at most [`PREFILL_CHUNK`] tokens: a long prompt's activations then
    /// take a bounded amount of memory, and every row comes out as it would
    /// read whole (Cake's kernels compute each row on its own).
    pub fn forward(&self, tokens: &[u32], session: &mut Session, which: LogitsFor) -> Result<Tensor> {
        self.forward_with(tokens, 0, &[], session, which)
    }

    /// Like [`Self::forward`] for the prompt positions `first..` of a prompt
    /// holding `pictures` (a picture whose tokens see each other is read
    /// in one piece).
    pub fn forward_with(
        &self,
        tokens: &[u32],
        first: usize,
        pictures: &[PromptPicture],
        session: &mut Session,
        which: LogitsFor,
    ) -> Result<Tensor> {
        if tokens.is_empty() {
            bail!("no tokens to run");
        }
        let mut logits = Vec::new();
        let mut read = 0;
        while read < tokens.len() {
            let wanted = PREFILL_CHUNK.min(tokens.len() - read);
            let piece = &tokens[read..read + pictures::piece_length(first + read, wanted, pictures)?];
            let hidden = self.hidden_states_with(piece, first + read, pictures, session)?;
            read += piece.len();
            if read == tokens.len() || which == LogitsFor::All {
                logits.push(self.decoder().logits(&hidden, which)?);
            }
        }
        Ok(Tensor::cat(&logits, 0)?)
    }

    /// f32 logits `(n, vocab)` for one new token of each of `n` sessions
    /// (`tokens[i]` appended to `sessions[i]`): a decode step of several
    /// sequences that reads the weights once for all.
    pub fn forward_streams(&self, tokens: &[u32], sessions: &mut [&mut Session]) -> Result<Tensor> {
        if tokens.is_empty() || tokens.len() != sessions.len() {
            bail!("{} tokens for {} sessions", tokens.len(), sessions.len());
        }
        let hidden = self.pipeline.run_layers_streams(&self.decoder().embed(tokens)?, sessions)?;
        self.decoder().logits(&hidden, LogitsFor::All)
    }

    /// The picture reader, or an error saying why this model reads none.
    pub fn vision(&self) -> Result<&VisionModel> {
        match (&self.vision, &self.vision_unusable) {
            (Some(vision), _) => Ok(vision),
            (None, Some(why)) => bail!("{}: this model's picture reader did not load: {why}", self.path.display()),
            (None, None) => bail!("{}: this model reads text only, not pictures", self.path.display()),
        }
    }

    /// The tokenizer, or an error saying the model has none.
    pub fn tokenizer(&self) -> Result<&TextTokenizer> {
        self.tokenizer.as_ref().with_context(|| format!("{}: the model has no tokenizer", self.path.display()))
    }

    /// The model's chat template (when it has none, its family's turns
    /// where the vocabulary has their markers, else ChatML).
    pub fn chat_template(&self) -> Result<ChatTemplate> {
        let tok = self.tokenizer.as_ref();
        let fallback = fallback_template(|text| tok.and_then(|t| t.token_id(text)).is_some());
        ChatTemplate::new(
            Some(self.chat_template_source.as_deref().unwrap_or(fallback)),
            tok.and_then(|t| t.bos_token.as_deref()),
            tok.and_then(|t| t.eos_token.as_deref()),
        )
    }
}

/// What a checkpoint says about its text besides the weights.
struct TextSide {
    tokenizer: Option<TextTokenizer>,
    chat_template_source: Option<String>,
    eos_token_ids: Vec<u32>,
    sampling_defaults: SamplingParams,
    embedding: Option<EmbeddingSpec>,
    vision: Option<VisionModel>,
    vision_unusable: Option<String>,
}

impl TextSide {
    /// Reads the tokenizer, chat template, stop tokens, sampling defaults
    /// and the picture reader of a model that takes pictures (a GGUF
    /// model's from `picture_reader`, else from beside its file).
    fn read(checkpoint: &Checkpoint, picture_reader: Option<&Path>) -> Result<Self> {
        let mut eos = checkpoint.config().eos_token_ids.clone();
        let mut sampling_defaults = SamplingParams::default();
        let embedding = match checkpoint {
            Checkpoint::Folder { dir, .. } => EmbeddingSpec::of_folder(dir)?,
            Checkpoint::Gguf { file, .. } => EmbeddingSpec::of_gguf_file(file)?,
        };
        let (mut tokenizer, chat_template_source) = match checkpoint {
            Checkpoint::Folder { dir, .. } => {
                if let Some(generation) = read_json(&dir.join("generation_config.json"))? {
                    eos.extend(crate::models::config::token_ids(generation.get("eos_token_id")));
                    sampling_defaults =
                        SamplingOverrides::from_generation_config(&generation).apply_to(&sampling_defaults);
                }
                folder_text_files(dir)?
            }
            Checkpoint::Gguf { file, .. } => {
                (Some(TextTokenizer::from_gguf(file)?), file.get_str("tokenizer.chat_template").map(str::to_string))
            }
        };
        if let Some(tokenizer) = &tokenizer {
            eos.extend(tokenizer.eos_token.as_deref().and_then(|name| tokenizer.token_id(name)));
            eos.extend_from_slice(tokenizer.end_of_generation_ids());
        }
        eos.sort_unstable();
        eos.dedup();
        let width = checkpoint.config().hidden_size;
        let vision = match (checkpoint, picture_reader) {
            (Checkpoint::Folder { dir, .. }, None) => {
                VisionModel::load_folder(dir, tokenizer.as_ref().map(|t| t as &dyn PictureVocabulary))
            }
            (Checkpoint::Folder { dir, .. }, Some(_)) => {
                bail!("{}: an mmproj picture reader goes with a GGUF model, not a model folder", dir.display())
            }
            (Checkpoint::Gguf { file, .. }, named) => {
                let found = match named {
                    Some(path) => Mmproj::open(path).map(Some),
                    None => VisionModel::mmproj_beside(&file.path, width),
                };
                match (found, tokenizer.as_mut()) {
                    (Ok(Some(mmproj)), Some(tokenizer)) => VisionModel::load_mmproj(mmproj, tokenizer).map(Some),
                    (Err(why), _) => Err(why),
                    _ => Ok(None),
                }
            }
        };
        let vision = vision.and_then(|vision| match vision {
            Some(v) if v.output_width() != width => {
                bail!("its picture reader makes tokens {} wide for a text model {width} wide", v.output_width())
            }
            other => Ok(other),
        });
        let (vision, vision_unusable) = match vision {
            Ok(vision) => (vision, None),
            Err(error) => {
                tracing::warn!("the model's vision part did not load, it reads text only: {error:#}");
                (None, Some(format!("{error:#}")))
            }
        };
        Ok(Self {
            tokenizer,
            chat_template_source,
            eos_token_ids: eos,
            sampling_defaults,
            embedding,
            vision,
            vision_unusable,
        })
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

/// Tokenizer and chat template of a model folder: the template from
/// chat_template.jinja, else the processor's chat_template.json (as
/// vision models publish it), else tokenizer_config.json.
fn folder_text_files(dir: &Path) -> Result<(Option<TextTokenizer>, Option<String>)> {
    let tokenizer = if dir.join("tokenizer.json").exists() { Some(TextTokenizer::from_folder(dir)?) } else { None };
    let chat_template = match std::fs::read_to_string(dir.join("chat_template.jinja")) {
        Ok(source) => Some(source),
        Err(_) => match read_json(&dir.join("chat_template.json"))?.as_ref().and_then(chat_template_from_config) {
            Some(source) => Some(source),
            None => read_json(&dir.join("tokenizer_config.json"))?.as_ref().and_then(chat_template_from_config),
        },
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

/// Gives the memory that loading freed back to the system: the tokenizer
/// was read on another thread, whose allocator arena the main thread never
/// reuses, so its freed temporaries would otherwise stay resident.
fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free pages; it is thread-safe.
    unsafe {
        libc::malloc_trim(0);
    }
}
