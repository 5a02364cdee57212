//! The commands of docs/api.md, written once for both transports.
//!
//! [`App::call`] answers plain commands with JSON; [`App::stream`] starts a
//! streaming command whose events go to an [`EventSink`]. Arguments arrive
//! as JSON and are checked here, so a malformed request is a clear
//! `BadRequest` whichever transport carried it.

use super::engine::{base64_encode, CancelFlag, ChatJob, EventSink, Prompt, SpeakJob};
use super::error::ApiError;
use super::events::{Done, EngineEvent, ErrorKind, Progress};
use super::picture_store::pictures_in;
use super::request::{
    AddPictureArgs, AddVoiceArgs, AppChatArgs, ChatArgs, Command, CommandRequest, ReplyArgs, SpeakArgs,
};
use super::App;
use crate::cluster::cluster_key::ClusterKey;
use crate::files::hf_cache;
use crate::library::catalog::{Catalog, ModelEntry, ModelKind, ModelStatus};
use crate::library::download::{DownloadError, DownloadProgress, Downloader};
use crate::library::hub::{HubConnection, HubUnreachable};
use crate::speech::family::VoiceKind;
use crate::speech::model::Voices;
use crate::speech::vibevoice::generate::SpeechSettings;
use crate::text::chat_template::{ChatMessage, RenderOptions};
use crate::text::logprobs::MAX_TOP_LOGPROBS;
use crate::text::tool_calls::{tool_name, ToolChoice};
use serde_json::{json, Value};
use std::sync::atomic::Ordering;

/// The smallest `context_length` a chat may ask for: room for a template's
/// markers, a short message and a reply.
const MIN_CONTEXT_LENGTH: usize = 16;

impl App {
    /// Runs a plain command.
    pub fn call(&self, request: CommandRequest) -> Result<Value, ApiError> {
        let _span = tracing::info_span!("command", name = %request.name).entered();
        let not_found = |e: anyhow::Error| ApiError::NotFound(format!("{e:#}"));
        match request.command {
            Command::AppInfo => Ok(json!({
                "version": env!("CARGO_PKG_VERSION"),
                "data_dir": self.catalog.data_dir(),
                "default_model_id": self.catalog.find("default").ok().map(|e| e.id),
            })),
            Command::ListModels => {
                let models = self.catalog.list().map_err(ApiError::server)?;
                Ok(json!({
                    "models": models,
                    "loaded": self.engine.loaded().map(|e| e.id),
                    "loaded_gpu": self.engine.loaded_placement(),
                }))
            }
            Command::ImportModel { path } => {
                let entry = self.catalog.import(std::path::Path::new(&path)).map_err(ApiError::of)?;
                Ok(serde_json::to_value(entry).expect("entries serialize"))
            }
            Command::DeleteModel { id } => {
                if self.engine.loaded().is_some_and(|e| e.id == id) {
                    self.engine.unload();
                }
                self.catalog.delete(&id).map_err(not_found)?;
                Ok(json!({}))
            }
            Command::UnloadModel => {
                self.engine.unload();
                Ok(json!({}))
            }
            Command::ListConversations => Ok(json!({"conversations": self.conversations.list()?})),
            Command::GetConversation { id } => self.conversations.get(&id),
            Command::SaveConversation { conversation } => {
                self.conversations.save(&conversation)?;
                Ok(json!({}))
            }
            Command::SearchConversations { query } => Ok(json!({"conversations": self.conversations.search(&query)?})),
            Command::SearchHub { query } => {
                Ok(json!({"models": HubConnection::from_env().search_models(&query).map_err(ApiError::of_hub)?}))
            }
            Command::HubFiles { repo_id } => {
                Ok(serde_json::to_value(HubConnection::from_env().gguf_files(&repo_id).map_err(ApiError::of_hub)?)
                    .expect("file lists serialize"))
            }
            Command::DeleteConversation { id } => {
                self.delete_conversation(&id)?;
                Ok(json!({}))
            }
            Command::ListVoices => Ok(json!({"voices": self.speech.voices().map_err(ApiError::server)?})),
            Command::AddVoice(a) => self.add_voice(a),
            Command::SetVoiceTranscript { id, transcript } => {
                let voice = self.speech.set_transcript(&id, &transcript).map_err(ApiError::of)?;
                Ok(serde_json::to_value(voice).expect("voices serialize"))
            }
            Command::DeleteVoice { id } => {
                self.speech.delete_voice(&id).map_err(not_found)?;
                Ok(json!({}))
            }
            Command::VoiceAudio { id } => {
                let bytes = self.speech.voice_wav(&id).map_err(not_found)?;
                Ok(json!({"wav_base64": base64_encode(&bytes)}))
            }
            Command::ListClips => Ok(json!({"clips": self.speech.clips().map_err(ApiError::server)?})),
            Command::ClipAudio { id } => {
                let bytes = self.speech.clip_wav(&id).map_err(not_found)?;
                Ok(json!({"wav_base64": base64_encode(&bytes)}))
            }
            Command::DeleteClip { id } => {
                self.speech.delete_clip(&id).map_err(not_found)?;
                Ok(json!({}))
            }
            Command::AddPicture(a) => self.add_picture(a),
            Command::PictureThumbnail { id } => {
                Ok(json!({"jpeg_base64": base64_encode(&self.pictures.thumbnail(&id)?)}))
            }
            Command::ClusterStatus => Ok(self.cluster.status()),
            Command::GenerateClusterKey => Ok(json!({"key": ClusterKey::generate()})),
            Command::SetClusterSettings(update) => {
                self.cluster.update(update).map_err(ApiError::of)?;
                self.engine.configure(
                    self.cluster.master_settings(),
                    self.cluster.context_length(),
                    self.cluster.gpu_request(),
                );
                Ok(self.cluster.status())
            }
            Command::ScanCluster => {
                self.cluster.scan().map_err(ApiError::bad)?;
                Ok(self.cluster.status())
            }
            Command::PreviewCluster { model_id } => {
                let model = self.usable_model_of_kind(&model_id, ModelKind::Text)?;
                let preview = self.cluster.preview(&model.path).map_err(ApiError::bad)?;
                Ok(serde_json::to_value(preview).expect("previews serialize"))
            }
            Command::CancelStream { stream_id } => {
                if let Some(flag) = self.streams.lock().expect("streams").remove(&stream_id) {
                    flag.store(true, Ordering::Relaxed);
                }
                Ok(json!({}))
            }
            Command::LoadModel { .. }
            | Command::Chat(_)
            | Command::Speak(_)
            | Command::DownloadModel { .. }
            | Command::FetchSpeechTokenizer { .. } => {
                Err(ApiError::BadRequest(format!("`{}` is a streaming command", request.name)))
            }
            Command::Unknown => Err(ApiError::NotFound(format!("unknown command `{}`", request.name))),
        }
    }

    fn add_picture(&self, a: AddPictureArgs) -> Result<Value, ApiError> {
        let picture = match (a.path, a.file_base64) {
            (Some(path), None) => self.pictures.add_file(std::path::Path::new(&path)),
            (None, Some(data)) => {
                let bytes = base64_decode(&data)
                    .map_err(|e| ApiError::BadRequest(format!("add_picture: `file_base64` is not base64: {e}")))?;
                self.pictures.add_bytes(a.file_name.as_deref().unwrap_or("the picture"), &bytes)
            }
            _ => return Err(ApiError::BadRequest("add_picture: give either `path` or `file_base64`".into())),
        };
        Ok(serde_json::to_value(picture.map_err(ApiError::of)?).expect("pictures serialize"))
    }

    /// Deletes a conversation, and the pictures only it showed.
    fn delete_conversation(&self, id: &str) -> Result<(), ApiError> {
        let mut shown = std::collections::HashSet::new();
        if let Ok(conversation) = self.conversations.get(id) {
            pictures_in(&conversation, &mut shown);
        }
        self.conversations.delete(id)?;
        if let Some(used) = self.conversations.pictures_used().filter(|_| !shown.is_empty()) {
            self.pictures.forget(&shown, &used);
        }
        Ok(())
    }

    fn add_voice(&self, a: AddVoiceArgs) -> Result<Value, ApiError> {
        let voice = match (a.path, a.file_base64) {
            (Some(path), None) => self.speech.add_voice_file(&a.name, std::path::Path::new(&path)),
            (None, Some(data)) => {
                let bytes = base64_decode(&data)
                    .map_err(|e| ApiError::BadRequest(format!("add_voice: `file_base64` is not base64: {e}")))?;
                self.speech.add_voice_bytes(&a.name, a.file_name.as_deref().unwrap_or(&a.name), &bytes)
            }
            _ => return Err(ApiError::BadRequest("add_voice: give either `path` or `file_base64`".into())),
        };
        let mut voice = voice.map_err(ApiError::of)?;
        if let Some(transcript) = a.transcript.filter(|t| !t.trim().is_empty()) {
            voice = self.speech.set_transcript(&voice.id, &transcript).map_err(ApiError::of)?;
        }
        Ok(serde_json::to_value(voice).expect("voices serialize"))
    }

    /// Starts a streaming command, stopped when `cancel` is raised (or its
    /// `cancel_stream` comes). Errors found before any work starts are
    /// returned; later ones arrive as an `error` event.
    pub fn stream(&self, request: CommandRequest, sink: EventSink, cancel: CancelFlag) -> Result<(), ApiError> {
        let _span = tracing::info_span!("command", name = %request.name).entered();
        let sink = self.register_stream(request.stream_id, cancel.clone(), sink);
        match request.command {
            Command::LoadModel { id } => {
                let model = self.usable_model(&id)?;
                self.engine.load(model, sink, cancel);
                Ok(())
            }
            Command::Chat(args) => {
                let job = self.chat_job(self.with_pictures(args)?)?;
                self.engine.chat(job, sink, cancel);
                Ok(())
            }
            Command::Speak(args) => {
                let job = self.speak_job(args)?;
                self.engine.speak(job, sink, cancel);
                Ok(())
            }
            Command::DownloadModel { repo_id, file } => {
                if !hf_cache::looks_like_repo_id(&repo_id) {
                    return Err(ApiError::BadRequest(format!("`{repo_id}` is not a Hugging Face model id (org/name)")));
                }
                let downloader = Downloader::from_env(self.catalog.hf_cache().to_path_buf());
                let catalog = self.catalog.clone();
                let target = match file {
                    Some(file) => Download::GgufFile { id: format!("hf:{repo_id}/{file}"), repo_id, file },
                    None => Download::Repository { id: format!("hf:{repo_id}"), repo_id },
                };
                std::thread::spawn(move || download(downloader, catalog, target, sink, cancel));
                Ok(())
            }
            Command::FetchSpeechTokenizer { id } => {
                let model = self.catalog.find(&id).map_err(|e| ApiError::NotFound(format!("{e:#}")))?;
                let needs = model.kind == ModelKind::Speech && model.voice != Some(VoiceKind::TranscribedPrompt);
                if !needs || model.status == ModelStatus::Complete {
                    return Err(ApiError::BadRequest(format!("{} needs no tokenizer download", model.name)));
                }
                let downloader = Downloader::from_env(self.catalog.hf_cache().to_path_buf());
                let catalog = self.catalog.clone();
                let target = Download::SpeechTokenizer { id, model_dir: model.path };
                std::thread::spawn(move || download(downloader, catalog, target, sink, cancel));
                Ok(())
            }
            Command::Unknown => Err(ApiError::NotFound(format!("unknown command `{}`", request.name))),
            _ => Err(ApiError::BadRequest(format!("`{}` is not a streaming command", request.name))),
        }
    }

    /// Remembers the cancel flag under the UI's stream id and forgets it
    /// when the stream ends.
    fn register_stream(&self, stream_id: Option<String>, cancel: CancelFlag, mut sink: EventSink) -> EventSink {
        let Some(id) = stream_id else {
            return sink;
        };
        self.streams.lock().expect("streams").insert(id.clone(), cancel);
        let streams = self.streams.clone();
        Box::new(move |event: EngineEvent| {
            let last = event.is_last();
            let listening = sink(event);
            if last {
                streams.lock().expect("streams").remove(&id);
            }
            listening
        })
    }

    /// Checks a chat request and resolves its model.
    /// The app's chat request with the stored pictures its messages name
    /// attached.
    fn with_pictures(&self, a: AppChatArgs) -> Result<ChatArgs, ApiError> {
        let mut chat = a.chat;
        chat.messages = a
            .messages
            .into_iter()
            .enumerate()
            .map(|(i, message)| message.attach(i + 1, &self.pictures))
            .collect::<Result<_, _>>()?;
        Ok(chat)
    }

    pub fn chat_job(&self, a: ChatArgs) -> Result<ChatJob, ApiError> {
        let reply = ReplyArgs {
            model_id: a.model_id,
            sampling: a.sampling,
            max_tokens: a.max_tokens,
            stop: a.stop,
            context_length: a.context_length,
            format: a.format,
            logprobs: a.logprobs,
        };
        if let ToolChoice::Named(name) = &a.tool_choice {
            if !a.tools.iter().flatten().any(|tool| tool_name(tool) == Some(name.as_str())) {
                return Err(ApiError::BadRequest(format!(
                    "`tool_choice` names `{name}`, which is not among the tools"
                )));
            }
        }
        if a.tool_choice != ToolChoice::Auto && a.tools.as_ref().is_none_or(Vec::is_empty) {
            return Err(ApiError::BadRequest("`tool_choice` asks for a call but no `tools` are offered".into()));
        }
        let options = RenderOptions { enable_thinking: a.enable_thinking, tools: a.tools };
        let mut job = self.reply_job(reply, Prompt::Conversation { messages: a.messages, options })?;
        job.tool_choice = a.tool_choice;
        job.drop_oldest_turns = a.drop_oldest_turns;
        Ok(job)
    }

    /// Checks a request to continue `prompt` and finds its model.
    pub fn reply_job(&self, a: ReplyArgs, prompt: Prompt) -> Result<ChatJob, ApiError> {
        match &prompt {
            Prompt::Conversation { messages, .. } if messages.is_empty() => {
                return Err(ApiError::BadRequest("chat: `messages` is empty".into()));
            }
            Prompt::Conversation { messages, options } => {
                let known = |m: &&ChatMessage| matches!(m.role.as_str(), "system" | "user" | "assistant" | "tool");
                if let Some(m) = messages.iter().find(|m| !known(m)) {
                    return Err(ApiError::BadRequest(format!("chat: unknown role `{}`", m.role)));
                }
                check_tools(options.tools.as_deref())?;
            }
            Prompt::Text(text) if text.is_empty() => return Err(ApiError::BadRequest("the prompt is empty".into())),
            Prompt::Text(_) => {}
        }
        if a.logprobs.is_some_and(|top| top > MAX_TOP_LOGPROBS) {
            return Err(ApiError::BadRequest(format!(
                "at most {MAX_TOP_LOGPROBS} alternatives per token may be asked"
            )));
        }
        if a.max_tokens == 0 {
            return Err(ApiError::BadRequest("chat: `max_tokens` must be at least 1".into()));
        }
        let model = self.usable_model_of_kind(&a.model_id, ModelKind::Text)?;
        let sampling = a.sampling;
        if let Err(e) = sampling.apply_to(&Default::default()).validate() {
            return Err(ApiError::bad(e));
        }
        if a.context_length.is_some_and(|n| n < MIN_CONTEXT_LENGTH) {
            return Err(ApiError::BadRequest(format!(
                "chat: `context_length` must be at least {MIN_CONTEXT_LENGTH} tokens"
            )));
        }
        Ok(ChatJob {
            model,
            prompt,
            sampling,
            max_tokens: a.max_tokens,
            stop: a.stop,
            context_length: a.context_length,
            drop_oldest_turns: false,
            format: a.format,
            tool_choice: ToolChoice::Auto,
            logprobs: a.logprobs,
        })
    }

    /// Checks a speech request and gathers its model and voices.
    pub fn speak_job(&self, a: SpeakArgs) -> Result<SpeakJob, ApiError> {
        if a.script.trim().is_empty() {
            return Err(ApiError::BadRequest("speak: the script is empty".into()));
        }
        let model = self.usable_model_of_kind(&a.model_id, ModelKind::Speech)?;
        let kind = model.voice.unwrap_or_default();
        let voices = match kind {
            VoiceKind::Prompt => Voices::Prompts(
                a.voice_ids
                    .iter()
                    .map(|id| {
                        self.speech.voice_samples(id).map_err(|e| ApiError::NotFound(format!("voice `{id}`: {e:#}")))
                    })
                    .collect::<Result<Vec<_>, _>>()?,
            ),
            VoiceKind::Preset => {
                let id = only_voice(&a.voice_ids, &model, "one voice preset")?;
                let path =
                    self.speech.preset_path(id).map_err(|e| ApiError::BadRequest(format!("voice `{id}`: {e:#}")))?;
                Voices::Preset(path)
            }
            VoiceKind::TranscribedPrompt => {
                let id = only_voice(&a.voice_ids, &model, "one voice prompt with its transcript")?;
                let (samples, transcript) = self
                    .speech
                    .transcribed_prompt(id)
                    .map_err(|e| ApiError::BadRequest(format!("voice `{id}`: {e:#}")))?;
                Voices::Transcribed { samples, transcript }
            }
        };
        let defaults = kind.family().default_settings();
        let steps = a.steps.unwrap_or(defaults.steps);
        if !(1..=100).contains(&steps) {
            return Err(ApiError::BadRequest("speak: `steps` must be between 1 and 100".into()));
        }
        let cfg_scale = a.cfg_scale.unwrap_or(defaults.cfg_scale);
        if !(0.0..=10.0).contains(&cfg_scale) {
            return Err(ApiError::BadRequest("speak: `cfg_scale` must be between 0 and 10".into()));
        }
        if a.max_seconds.is_some_and(|s| s.is_nan() || s <= 0.0) {
            return Err(ApiError::BadRequest("speak: `max_seconds` must be positive".into()));
        }
        Ok(SpeakJob {
            model,
            script: a.script,
            voice_ids: a.voice_ids,
            voices,
            settings: SpeechSettings { cfg_scale, steps, max_seconds: a.max_seconds },
            seed: a.seed.unwrap_or_else(rand::random),
            keep_clip: a.keep_clip,
            library: self.speech.clone(),
        })
    }

    /// Like [`Self::usable_model`], also checking what the model does.
    pub fn usable_model_of_kind(&self, id: &str, kind: ModelKind) -> Result<ModelEntry, ApiError> {
        let entry = self.usable_model(id)?;
        if entry.kind != kind {
            let (name, is, wanted) = (&entry.name, entry.kind.described(), kind.described());
            return Err(ApiError::BadRequest(format!("{name} is {is}, not {wanted}")));
        }
        Ok(entry)
    }

    /// The library entry `id`, if it exists and is complete.
    pub fn usable_model(&self, id: &str) -> Result<ModelEntry, ApiError> {
        let entry = self.catalog.find(id).map_err(|e| ApiError::NotFound(format!("{e:#}")))?;
        match entry.status {
            ModelStatus::Complete => Ok(entry),
            _ => Err(ApiError::BadRequest(format!(
                "{} cannot be used: {}",
                entry.name,
                entry.problem.as_deref().unwrap_or("it is not complete")
            ))),
        }
    }
}

/// Downloads a repository's model, or one GGUF `file` of it, then reports
/// the model as the library lists it (run on its own thread: downloads do
/// not wait for the engine).
/// The most tools one request may offer.
const MAX_TOOLS: usize = 256;

/// Checks a request's tools: each a function with a usable name.
fn check_tools(tools: Option<&[Value]>) -> Result<(), ApiError> {
    let Some(tools) = tools else { return Ok(()) };
    if tools.len() > MAX_TOOLS {
        return Err(ApiError::BadRequest(format!("at most {MAX_TOOLS} tools may be offered, not {}", tools.len())));
    }
    for (index, tool) in tools.iter().enumerate() {
        if tool["type"] != "function" {
            return Err(ApiError::BadRequest(format!("tools[{index}]: only `function` tools are supported")));
        }
        let named = tool_name(tool).is_some_and(|name| {
            (1..=64).contains(&name.len()) && name.chars().all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c))
        });
        if !named {
            return Err(ApiError::BadRequest(format!(
                "tools[{index}].function.name must be 1 to 64 letters, digits, `_`, `-` or `.`"
            )));
        }
    }
    Ok(())
}

/// What a download stream fetches, and the library entry (`id`) it makes usable.
enum Download {
    /// A transformers model: config, tokenizer and safetensors weights.
    Repository { id: String, repo_id: String },
    /// One GGUF file of a repository.
    GgufFile { id: String, repo_id: String, file: String },
    /// The text tokenizer the VibeVoice folder `model_dir` lacks.
    SpeechTokenizer { id: String, model_dir: std::path::PathBuf },
}

fn download(downloader: Downloader, catalog: Catalog, target: Download, mut sink: EventSink, cancel: CancelFlag) {
    let mut on_progress = |p: &DownloadProgress| {
        sink(EngineEvent::Progress(Progress::Download(p.clone()))) && !cancel.load(Ordering::Relaxed)
    };
    let (downloaded, id) = match target {
        Download::Repository { id, repo_id } => (downloader.download(&repo_id, &mut on_progress), id),
        Download::GgufFile { id, repo_id, file } => (downloader.download_gguf(&repo_id, &file, &mut on_progress), id),
        Download::SpeechTokenizer { id, model_dir } => {
            (downloader.download_speech_tokenizer(&model_dir, &mut on_progress), id)
        }
    };
    // The failure itself, not wrapped, so that its kind can be told.
    let unwrapped = |error: DownloadError| match error {
        DownloadError::Failed(error) => error,
        cancelled => anyhow::Error::from(cancelled),
    };
    let result = downloaded.map_err(unwrapped).and_then(|_| catalog.find(&id));
    sink(match result {
        Ok(model) => EngineEvent::Done(Done::Model { model }),
        Err(e) if HubUnreachable::is_in(&e) => EngineEvent::error(ErrorKind::HubUnreachable, format!("{e:#}")),
        Err(e) => EngineEvent::error(ErrorKind::Failed, format!("{e:#}")),
    });
}

/// The one voice of a model that speaks in `what` (a 400 naming the model
/// when `ids` holds another number of voices).
fn only_voice<'a>(ids: &'a [String], model: &ModelEntry, what: &str) -> Result<&'a String, ApiError> {
    match ids {
        [id] => Ok(id),
        _ => Err(ApiError::BadRequest(format!(
            "speak: {} speaks in {what}; {} voices were given",
            model.name,
            ids.len()
        ))),
    }
}

fn base64_decode(text: &str) -> Result<Vec<u8>, base64::DecodeError> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.decode(text.trim())
}
