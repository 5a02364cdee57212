//! The commands of docs/api.md, written once for both transports.
//!
//! [`App::call`] answers plain commands with JSON; [`App::stream`] starts a
//! streaming command whose events go to an [`EventSink`]. Arguments arrive
//! as JSON and are checked here, so a malformed request is a clear
//! `BadRequest` whichever transport carried it.

use super::engine::{base64_encode, CancelFlag, ChatJob, EventSink, SpeakJob};
use super::error::ApiError;
use super::App;
use crate::cluster::cluster_key::ClusterKey;
use crate::files::hf_cache;
use crate::library::catalog::{Catalog, ModelEntry, ModelKind, ModelStatus};
use crate::library::download::{DownloadProgress, Downloader};
use crate::speech::vibevoice::generate::SpeechSettings;
use crate::text::chat_template::ChatMessage;
use crate::text::sampling::SamplingOverrides;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Reads the command's arguments into `T`.
fn args<T: DeserializeOwned>(command: &str, value: Value) -> Result<T, ApiError> {
    serde_json::from_value(value).map_err(|e| ApiError::BadRequest(format!("{command}: invalid arguments: {e}")))
}

#[derive(Deserialize)]
struct IdArgs {
    id: String,
}

#[derive(Deserialize)]
struct PathArgs {
    path: String,
}

#[derive(Deserialize)]
struct RepoArgs {
    repo_id: String,
}

#[derive(Deserialize)]
struct ConversationArgs {
    conversation: Value,
}

#[derive(Deserialize)]
struct StreamIdArgs {
    stream_id: String,
}

#[derive(Deserialize)]
struct AddVoiceArgs {
    name: String,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    wav_base64: Option<String>,
    /// The uploaded file's name, for messages (default: `name`).
    #[serde(default)]
    file_name: Option<String>,
}

/// Arguments of `speak`.
#[derive(Deserialize)]
pub struct SpeakArgs {
    pub model_id: String,
    pub script: String,
    pub voice_ids: Vec<String>,
    #[serde(default)]
    pub cfg_scale: Option<f64>,
    #[serde(default)]
    pub steps: Option<usize>,
    #[serde(default)]
    pub seed: Option<u64>,
    #[serde(default)]
    pub max_seconds: Option<f64>,
}

/// Arguments of `chat`.
#[derive(Deserialize)]
pub struct ChatArgs {
    pub model_id: String,
    pub messages: Vec<ChatMessage>,
    #[serde(default)]
    pub sampling: SamplingOverrides,
    #[serde(default = "default_max_tokens")]
    pub max_tokens: usize,
    #[serde(default)]
    pub stop: Vec<String>,
}

fn default_max_tokens() -> usize {
    512
}

impl App {
    /// Runs a plain command.
    pub fn call(&self, command: &str, value: Value) -> Result<Value, ApiError> {
        match command {
            "app_info" => Ok(json!({
                "version": env!("CARGO_PKG_VERSION"),
                "data_dir": self.catalog.data_dir(),
                "default_model_id": self.catalog.find("default").ok().map(|e| e.id),
            })),
            "list_models" => {
                let models = self.catalog.list().map_err(|e| ApiError::Server(format!("{e:#}")))?;
                Ok(json!({"models": models, "loaded": self.engine.loaded().map(|e| e.id)}))
            }
            "import_model" => {
                let a: PathArgs = args(command, value)?;
                let entry = self.catalog.import(std::path::Path::new(&a.path)).map_err(ApiError::bad)?;
                Ok(serde_json::to_value(entry).expect("entries serialize"))
            }
            "delete_model" => {
                let a: IdArgs = args(command, value)?;
                if self.engine.loaded().is_some_and(|e| e.id == a.id) {
                    self.engine.unload();
                }
                self.catalog.delete(&a.id).map_err(|e| ApiError::NotFound(format!("{e:#}")))?;
                Ok(json!({}))
            }
            "unload_model" => {
                self.engine.unload();
                Ok(json!({}))
            }
            "list_conversations" => {
                let list = self.conversations.list().map_err(|e| ApiError::Server(format!("{e:#}")))?;
                Ok(json!({"conversations": list}))
            }
            "get_conversation" => {
                let a: IdArgs = args(command, value)?;
                self.conversations.get(&a.id).map_err(|e| ApiError::NotFound(format!("{e:#}")))
            }
            "save_conversation" => {
                let a: ConversationArgs = args(command, value)?;
                self.conversations.save(&a.conversation).map_err(ApiError::bad)?;
                Ok(json!({}))
            }
            "delete_conversation" => {
                let a: IdArgs = args(command, value)?;
                self.conversations.delete(&a.id).map_err(|e| ApiError::NotFound(format!("{e:#}")))?;
                Ok(json!({}))
            }
            "list_voices" => Ok(json!({"voices": self.speech.voices().map_err(ApiError::server)?})),
            "add_voice" => {
                let a: AddVoiceArgs = args(command, value)?;
                let voice = match (a.path, a.wav_base64) {
                    (Some(path), None) => self.speech.add_voice(&a.name, std::path::Path::new(&path)),
                    (None, Some(data)) => {
                        let bytes = base64_decode(&data)
                            .map_err(|e| ApiError::BadRequest(format!("add_voice: `wav_base64` is not base64: {e}")))?;
                        self.speech.add_voice_bytes(&a.name, a.file_name.as_deref().unwrap_or(&a.name), &bytes)
                    }
                    _ => return Err(ApiError::BadRequest("add_voice: give either `path` or `wav_base64`".into())),
                };
                Ok(serde_json::to_value(voice.map_err(ApiError::bad)?).expect("voices serialize"))
            }
            "delete_voice" => {
                let a: IdArgs = args(command, value)?;
                self.speech.delete_voice(&a.id).map_err(|e| ApiError::NotFound(format!("{e:#}")))?;
                Ok(json!({}))
            }
            "voice_audio" => {
                let a: IdArgs = args(command, value)?;
                let bytes = self.speech.voice_wav(&a.id).map_err(|e| ApiError::NotFound(format!("{e:#}")))?;
                Ok(json!({"wav_base64": base64_encode(&bytes)}))
            }
            "list_clips" => Ok(json!({"clips": self.speech.clips().map_err(ApiError::server)?})),
            "clip_audio" => {
                let a: IdArgs = args(command, value)?;
                let bytes = self.speech.clip_wav(&a.id).map_err(|e| ApiError::NotFound(format!("{e:#}")))?;
                Ok(json!({"wav_base64": base64_encode(&bytes)}))
            }
            "delete_clip" => {
                let a: IdArgs = args(command, value)?;
                self.speech.delete_clip(&a.id).map_err(|e| ApiError::NotFound(format!("{e:#}")))?;
                Ok(json!({}))
            }
            "cluster_status" => Ok(self.cluster.status()),
            "generate_cluster_key" => Ok(json!({"key": ClusterKey::generate()})),
            "set_cluster_settings" => {
                let update: super::cluster::SettingsUpdate = args(command, value)?;
                self.cluster.update(update).map_err(ApiError::bad)?;
                self.engine.set_cluster(self.cluster.master_settings());
                Ok(self.cluster.status())
            }
            "scan_cluster" => {
                self.cluster.scan().map_err(ApiError::bad)?;
                Ok(self.cluster.status())
            }
            "cancel_stream" => {
                let a: StreamIdArgs = args(command, value)?;
                if let Some(flag) = self.streams.lock().expect("streams").remove(&a.stream_id) {
                    flag.store(true, Ordering::Relaxed);
                }
                Ok(json!({}))
            }
            _ if is_stream_command(command) => Err(ApiError::BadRequest(format!("`{command}` is a streaming command"))),
            _ => Err(ApiError::NotFound(format!("unknown command `{command}`"))),
        }
    }

    /// Starts a streaming command. Errors found before any work starts are
    /// returned; later ones arrive as an `error` event.
    pub fn stream(&self, command: &str, value: Value, sink: EventSink) -> Result<(), ApiError> {
        let stream_id = value.get("stream_id").and_then(Value::as_str).map(str::to_string);
        let cancel: CancelFlag = Arc::new(AtomicBool::new(false));
        let sink = self.register_stream(stream_id, cancel.clone(), sink);
        match command {
            "load_model" => {
                let a: IdArgs = args(command, value)?;
                let model = self.usable_model(&a.id)?;
                self.engine.load(model, sink, cancel);
                Ok(())
            }
            "chat" => {
                let job = self.chat_job(args(command, value)?)?;
                self.engine.chat(job, sink, cancel);
                Ok(())
            }
            "speak" => {
                let job = self.speak_job(args(command, value)?, true)?;
                self.engine.speak(job, sink, cancel);
                Ok(())
            }
            "download_model" => {
                let a: RepoArgs = args(command, value)?;
                if !hf_cache::looks_like_repo_id(&a.repo_id) {
                    return Err(ApiError::BadRequest(format!(
                        "`{}` is not a Hugging Face model id (org/name)",
                        a.repo_id
                    )));
                }
                let downloader = Downloader::from_env(self.catalog.hf_cache().to_path_buf());
                let catalog =
                    Catalog::new(self.catalog.data_dir().to_path_buf(), self.catalog.hf_cache().to_path_buf());
                std::thread::spawn(move || download(downloader, catalog, a.repo_id, sink, cancel));
                Ok(())
            }
            _ => Err(ApiError::NotFound(format!("unknown streaming command `{command}`"))),
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
        Box::new(move |event: Value| {
            let last = matches!(event["type"].as_str(), Some("done" | "error"));
            let listening = sink(event);
            if last {
                streams.lock().expect("streams").remove(&id);
            }
            listening
        })
    }

    /// Checks a chat request and resolves its model.
    pub fn chat_job(&self, a: ChatArgs) -> Result<ChatJob, ApiError> {
        if a.messages.is_empty() {
            return Err(ApiError::BadRequest("chat: `messages` is empty".into()));
        }
        if let Some(m) = a.messages.iter().find(|m| !matches!(m.role.as_str(), "system" | "user" | "assistant")) {
            return Err(ApiError::BadRequest(format!("chat: unknown role `{}`", m.role)));
        }
        if a.max_tokens == 0 {
            return Err(ApiError::BadRequest("chat: `max_tokens` must be at least 1".into()));
        }
        let model = self.usable_model_of_kind(&a.model_id, ModelKind::Text)?;
        let sampling = a.sampling;
        if let Err(e) = sampling.apply_to(&Default::default()).validate() {
            return Err(ApiError::bad(e));
        }
        Ok(ChatJob { model, messages: a.messages, sampling, max_tokens: a.max_tokens, stop: a.stop })
    }

    /// Checks a speech request and gathers its model and voices.
    pub fn speak_job(&self, a: SpeakArgs, keep_clip: bool) -> Result<SpeakJob, ApiError> {
        if a.script.trim().is_empty() {
            return Err(ApiError::BadRequest("speak: the script is empty".into()));
        }
        let model = self.usable_model_of_kind(&a.model_id, ModelKind::Speech)?;
        let voices = a
            .voice_ids
            .iter()
            .map(|id| self.speech.voice_samples(id).map_err(|e| ApiError::NotFound(format!("voice `{id}`: {e:#}"))))
            .collect::<Result<Vec<_>, _>>()?;
        let steps = a.steps.unwrap_or(10);
        if !(1..=100).contains(&steps) {
            return Err(ApiError::BadRequest("speak: `steps` must be between 1 and 100".into()));
        }
        let cfg_scale = a.cfg_scale.unwrap_or(1.3);
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
            keep_clip,
            library: self.speech.clone(),
        })
    }

    /// Like [`Self::usable_model`], also checking what the model does.
    pub fn usable_model_of_kind(&self, id: &str, kind: ModelKind) -> Result<ModelEntry, ApiError> {
        let entry = self.usable_model(id)?;
        if entry.kind != kind {
            let wanted = match kind {
                ModelKind::Text => "a text model (for chat)",
                ModelKind::Speech => "a speech model",
            };
            return Err(ApiError::BadRequest(format!("{} is not {wanted}", entry.name)));
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

/// Runs a download on its own thread (downloads do not wait for the engine).
fn download(downloader: Downloader, catalog: Catalog, repo_id: String, mut sink: EventSink, cancel: CancelFlag) {
    let mut on_progress = |p: &DownloadProgress| {
        let mut event = serde_json::to_value(p).expect("progress serializes");
        event["type"] = json!("progress");
        sink(event) && !cancel.load(Ordering::Relaxed)
    };
    let result = downloader.download(&repo_id, &mut on_progress);
    let event = match result {
        Ok(_) => match catalog.find(&format!("hf:{repo_id}")) {
            Ok(model) => json!({"type": "done", "model": model}),
            Err(e) => json!({"type": "error", "message": format!("{e:#}")}),
        },
        Err(e) => json!({"type": "error", "message": format!("{e:#}")}),
    };
    sink(event);
}

/// Whether `command` answers with a stream of events.
pub fn is_stream_command(command: &str) -> bool {
    matches!(command, "load_model" | "chat" | "download_model" | "speak")
}

fn base64_decode(text: &str) -> Result<Vec<u8>, base64::DecodeError> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.decode(text.trim())
}
