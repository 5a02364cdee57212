//! What a request asks for, parsed once into a [`Command`].
//!
//! Both transports (`cake serve`'s `/app/<command>` and the window's IPC)
//! hand over a command name and its JSON arguments; [`CommandRequest::parse`]
//! turns them into one enum variant with typed arguments, and every later
//! step matches on the variant. Unknown names are `NotFound`, bad
//! arguments `BadRequest`, whichever transport carried them.

use super::cluster::SettingsUpdate;
use super::error::ApiError;
use super::picture_store::{MessageWithPictures, PictureId};
use crate::text::chat_template::ChatMessage;
use crate::text::constraint::OutputFormat;
use crate::text::sampling::SamplingOverrides;
use crate::text::tool_calls::ToolChoice;
use serde::Deserialize;
use serde_json::Value;

/// Every command of docs/api.md with its arguments.
#[derive(Deserialize)]
#[serde(tag = "command", rename_all = "snake_case")]
pub enum Command {
    AppInfo,
    ListModels,
    ImportModel {
        path: String,
    },
    DeleteModel {
        id: String,
    },
    UnloadModel,
    ListConversations,
    GetConversation {
        id: String,
    },
    SaveConversation {
        conversation: Value,
    },
    DeleteConversation {
        id: String,
    },
    SearchConversations {
        query: String,
    },
    /// Repositories of GGUF models on the hub matching `query`.
    SearchHub {
        query: String,
    },
    /// The GGUF files of a hub repository.
    HubFiles {
        repo_id: String,
    },
    ListVoices,
    AddVoice(AddVoiceArgs),
    SetVoiceTranscript {
        id: String,
        transcript: String,
    },
    DeleteVoice {
        id: String,
    },
    VoiceAudio {
        id: String,
    },
    ListClips,
    ClipAudio {
        id: String,
    },
    DeleteClip {
        id: String,
    },
    /// Keep a picture for a conversation (an upload or a file on this machine).
    AddPicture(AddPictureArgs),
    /// A stored picture's thumbnail.
    PictureThumbnail {
        id: PictureId,
    },
    ClusterStatus,
    GenerateClusterKey,
    SetClusterSettings(SettingsUpdate),
    ScanCluster,
    /// The placement preview of a text model over the workers (master only).
    PreviewCluster {
        model_id: String,
    },
    CancelStream {
        stream_id: String,
    },
    // Streaming commands: their answer is a stream of events.
    LoadModel {
        id: String,
    },
    Chat(AppChatArgs),
    Speak(SpeakArgs),
    DownloadModel {
        repo_id: String,
        /// One GGUF file of the repository; absent: the repository's
        /// transformers model (config, tokenizer and safetensors weights).
        #[serde(default)]
        file: Option<String>,
    },
    /// Download the text tokenizer a VibeVoice model folder lacks.
    FetchSpeechTokenizer {
        id: String,
    },
    /// A name no command has.
    #[serde(other)]
    Unknown,
}

impl Command {
    /// Whether the answer is a stream of events rather than one JSON value.
    pub fn is_streaming(&self) -> bool {
        matches!(
            self,
            Self::LoadModel { .. }
                | Self::Chat(_)
                | Self::Speak(_)
                | Self::DownloadModel { .. }
                | Self::FetchSpeechTokenizer { .. }
        )
    }
}

/// A parsed request: the command and, for a stream, the id the UI may
/// cancel it by (`cancel_stream`).
pub struct CommandRequest {
    pub name: String,
    pub command: Command,
    pub stream_id: Option<String>,
}

impl CommandRequest {
    /// Parses the command `name` with `args` (a JSON object).
    pub fn parse(name: &str, args: Value) -> Result<Self, ApiError> {
        let Value::Object(mut fields) = args else {
            return Err(ApiError::BadRequest(format!("{name}: the arguments must be a JSON object")));
        };
        let stream_id = fields.get("stream_id").and_then(Value::as_str).map(str::to_string);
        fields.insert("command".into(), Value::String(name.to_string()));
        let command: Command = serde_json::from_value(Value::Object(fields))
            .map_err(|e| ApiError::BadRequest(format!("{name}: invalid arguments: {e}")))?;
        if matches!(command, Command::Unknown) {
            return Err(ApiError::NotFound(format!("unknown command `{name}`")));
        }
        Ok(Self { name: name.to_string(), command, stream_id })
    }
}

/// Arguments of `add_voice`: a file on the serving machine or an upload,
/// either one a WAV voice prompt or a voice preset.
#[derive(Deserialize)]
pub struct AddVoiceArgs {
    pub name: String,
    #[serde(default)]
    pub path: Option<String>,
    /// The uploaded file (`wav_base64` in older clients).
    #[serde(default, alias = "wav_base64")]
    pub file_base64: Option<String>,
    /// The uploaded file's name, for messages (default: `name`).
    #[serde(default)]
    pub file_name: Option<String>,
    /// What a WAV prompt says (LuxTTS needs it).
    #[serde(default)]
    pub transcript: Option<String>,
}

/// Arguments of `add_picture`: a file on the serving machine or an upload.
#[derive(Deserialize)]
pub struct AddPictureArgs {
    #[serde(default)]
    pub path: Option<String>,
    #[serde(default)]
    pub file_base64: Option<String>,
    /// The uploaded file's name, for messages.
    #[serde(default)]
    pub file_name: Option<String>,
}

/// Arguments of the app's `chat`: those of [`ChatArgs`], whose messages
/// may name stored pictures.
#[derive(Deserialize)]
pub struct AppChatArgs {
    pub messages: Vec<MessageWithPictures>,
    #[serde(flatten)]
    pub chat: ChatArgs,
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
    /// Keep the speech as a clip (the Speech screen, the default), or only
    /// play it as it is made and hand back the WAV (the chat's Read aloud).
    #[serde(default = "keep_by_default")]
    pub keep_clip: bool,
}

fn keep_by_default() -> bool {
    true
}

/// Arguments of `chat`.
#[derive(Deserialize)]
pub struct ChatArgs {
    pub model_id: String,
    /// (The app's `chat` reads them as [`AppChatArgs::messages`].)
    #[serde(default)]
    pub messages: Vec<ChatMessage>,
    #[serde(default)]
    pub sampling: SamplingOverrides,
    #[serde(default = "default_max_tokens")]
    pub max_tokens: usize,
    #[serde(default)]
    pub stop: Vec<String>,
    /// Hold at most this many tokens, prompt and reply (absent: the model's context length).
    #[serde(default)]
    pub context_length: Option<usize>,
    /// Leave out the oldest turns when the conversation does not fit.
    #[serde(default)]
    pub drop_oldest_turns: bool,
    /// `false` switches reasoning off where the model's template can.
    #[serde(default)]
    pub enable_thinking: Option<bool>,
    /// Functions the model may call (OpenAI's `tools` shape).
    #[serde(default)]
    pub tools: Option<Vec<Value>>,
    /// The format the reply must follow (set by the model APIs).
    #[serde(skip)]
    pub format: Option<OutputFormat>,
    /// Whether the reply must call a tool (set by the model APIs).
    #[serde(skip)]
    pub tool_choice: ToolChoice,
    /// Keep each token's log-probability and this many alternatives (set by the model APIs).
    #[serde(skip)]
    pub logprobs: Option<usize>,
}

/// How a reply is made, whatever it continues (a conversation or a text).
#[derive(Debug, Clone)]
pub struct ReplyArgs {
    pub model_id: String,
    pub sampling: SamplingOverrides,
    pub max_tokens: usize,
    pub stop: Vec<String>,
    /// Hold at most this many tokens, prompt and reply (`None`: the model's context length).
    pub context_length: Option<usize>,
    /// The format the reply must follow (none: free text).
    pub format: Option<OutputFormat>,
    /// Keep each token's log-probability and this many alternatives.
    pub logprobs: Option<usize>,
}

fn default_max_tokens() -> usize {
    512
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_and_arguments_become_typed_commands() {
        let request = CommandRequest::parse("get_conversation", json!({"id": "c1"})).unwrap();
        assert!(matches!(request.command, Command::GetConversation { ref id } if id == "c1"));
        let request =
            CommandRequest::parse("chat", json!({"model_id": "m", "messages": [], "stream_id": "s"})).unwrap();
        assert!(request.command.is_streaming());
        assert_eq!(request.stream_id.as_deref(), Some("s"));
        assert!(!CommandRequest::parse("app_info", json!({})).unwrap().command.is_streaming());
    }

    #[test]
    fn the_apps_chat_reads_its_messages_pictures_beside_the_other_arguments() {
        let id = "ab".repeat(32);
        let args = json!({"model_id": "m", "max_tokens": 7, "sampling": {"temperature": 0.0},
            "messages": [{"role": "user", "content": "What is it?", "pictures": [id]}, {"role": "assistant", "content": "A cat."}]});
        let Command::Chat(chat) = CommandRequest::parse("chat", args).unwrap().command else { panic!("not a chat") };
        assert_eq!((chat.chat.model_id.as_str(), chat.chat.max_tokens), ("m", 7));
        assert_eq!(chat.messages.len(), 2);
        assert_eq!(chat.messages[0].pictures.iter().map(PictureId::as_str).collect::<Vec<_>>(), [id.as_str()]);
        assert_eq!(chat.messages[0].message.content, "What is it?");
        assert!(chat.messages[1].pictures.is_empty());
        let bad =
            json!({"model_id": "m", "messages": [{"role": "user", "content": "x", "pictures": ["../../etc/passwd"]}]});
        let Err(ApiError::BadRequest(message)) = CommandRequest::parse("chat", bad) else {
            panic!("a bad id is refused")
        };
        assert!(message.contains("is not a picture id"), "{message}");
    }

    #[test]
    fn unknown_names_and_bad_arguments_are_told_apart() {
        assert!(matches!(CommandRequest::parse("no_such_thing", json!({})), Err(ApiError::NotFound(_))));
        let Err(ApiError::BadRequest(message)) = CommandRequest::parse("get_conversation", json!({})) else {
            panic!("a missing id is a bad request");
        };
        assert!(message.contains("missing field `id`"), "{message}");
        assert!(matches!(CommandRequest::parse("app_info", json!([1])), Err(ApiError::BadRequest(_))));
    }
}
