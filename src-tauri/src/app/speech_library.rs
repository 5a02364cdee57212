//! The voices and speech clips the app keeps, in `voices/` and `clips/` of
//! the data folder: each one a file with a small JSON description beside
//! it. A voice prompt is a WAV file (24 kHz, 16-bit mono), with the words
//! it says when they are known (LuxTTS needs them); a clip is a WAV file
//! at its model's rate; a voice preset (VibeVoice-Realtime) is kept as it
//! came, once checked. Writes are atomic.

use crate::audio::{wav, Audio};
use crate::files::storage::{write_atomically, write_json_atomically};
use crate::speech::family::VoiceKind;
use crate::speech::vibevoice::voice_preset::PresetSummary;
use crate::speech::voice_prompt::{VoicePrompt, SAMPLE_RATE};
use anyhow::{bail, Context, Result};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// A stored voice: a prompt or a preset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Voice {
    pub id: String,
    pub name: String,
    /// Voices stored before presets existed are prompts.
    #[serde(default)]
    pub kind: VoiceKind,
    /// The prompt's length and rate (`None` for a preset: it holds no audio).
    pub duration_s: Option<f64>,
    pub sample_rate: Option<u32>,
    pub created_at: String,
    /// Set when the file was cut to the prompt limit.
    pub notice: Option<String>,
    /// What the prompt says (LuxTTS reads it beside the audio).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transcript: Option<String>,
}

/// The longest transcript kept, in characters.
pub const MAX_TRANSCRIPT_CHARS: usize = 1000;

/// A stored piece of generated speech.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Clip {
    pub id: String,
    pub script: String,
    pub voice_ids: Vec<String>,
    pub model_id: String,
    pub duration_s: f64,
    pub frames: usize,
    pub seed: u64,
    pub cfg_scale: f64,
    pub steps: usize,
    /// `end_of_text`, `length` or `stopped`.
    pub end: String,
    pub created_at: String,
}

/// A folder of `<id>.json` descriptions, each with its `<id>.wav` (or,
/// for a voice preset, `<id>.preset`).
#[derive(Debug, Clone)]
struct Shelf {
    dir: PathBuf,
}

/// The extensions of the files a description may have beside it.
const DATA_EXTENSIONS: [&str; 2] = ["wav", "preset"];

fn valid_id(id: &str) -> Result<()> {
    if id.is_empty() || id.len() > 64 || !id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
        bail!("`{id}` is not a valid id");
    }
    Ok(())
}

/// `name` trimmed, if it is 1 to 80 characters long.
fn valid_name(name: &str) -> Result<String> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > 80 {
        bail!("a voice needs a name of 1 to 80 characters");
    }
    Ok(name.to_string())
}

/// `error`'s message with the (temporary) path of the file left out, for
/// an upload named otherwise.
fn error_without_path(error: &anyhow::Error, path: &Path) -> String {
    format!("{error:#}").replace(&format!("{}: ", path.display()), "")
}

/// Whether a file starting with `head` is a voice preset rather than a
/// WAV: a zip (`torch.save`) or a safetensors header (a little-endian
/// length, then `{`).
fn is_preset(head: &[u8]) -> bool {
    !head.starts_with(b"RIFF") && (head.starts_with(b"PK") || (head.len() > 8 && head[8] == b'{'))
}

fn new_id() -> String {
    format!("{:x}{:08x}", chrono::Utc::now().timestamp_millis(), rand::random::<u32>())
}

impl Shelf {
    fn paths(&self, id: &str) -> Result<(PathBuf, PathBuf)> {
        self.data_path(id, "wav").map(|wav| (wav, self.dir.join(format!("{id}.json"))))
    }

    fn data_path(&self, id: &str, extension: &str) -> Result<PathBuf> {
        valid_id(id)?;
        Ok(self.dir.join(format!("{id}.{extension}")))
    }

    fn put<T: Serialize>(&self, id: &str, audio: &Audio, meta: &T) -> Result<()> {
        let (wav_path, json_path) = self.paths(id)?;
        write_atomically(&wav_path, &wav::encode(audio)?)?;
        write_json_atomically(&json_path, meta)
    }

    fn list<T: DeserializeOwned>(&self, created: impl Fn(&T) -> &str) -> Result<Vec<T>> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", self.dir.display())),
        };
        let mut items = Vec::new();
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "json") {
                // A damaged description is skipped rather than hiding every other item.
                match std::fs::read(&path).ok().and_then(|b| serde_json::from_slice::<T>(&b).ok()) {
                    Some(item) => items.push(item),
                    None => tracing::warn!("{}: unreadable, skipped", path.display()),
                }
            }
        }
        items.sort_by(|a, b| created(b).cmp(created(a)));
        Ok(items)
    }

    fn get<T: DeserializeOwned>(&self, id: &str) -> Result<T> {
        let (_, json_path) = self.paths(id)?;
        let bytes = std::fs::read(&json_path).with_context(|| format!("no item `{id}`"))?;
        serde_json::from_slice(&bytes).with_context(|| format!("{}: unreadable", json_path.display()))
    }

    fn audio_bytes(&self, id: &str) -> Result<Vec<u8>> {
        let (wav_path, _) = self.paths(id)?;
        std::fs::read(&wav_path).with_context(|| format!("no audio for `{id}`"))
    }

    fn delete(&self, id: &str) -> Result<()> {
        let (_, json_path) = self.paths(id)?;
        if !json_path.exists() {
            bail!("no item `{id}`");
        }
        std::fs::remove_file(&json_path).with_context(|| format!("cannot delete {}", json_path.display()))?;
        for extension in DATA_EXTENSIONS {
            let _ = std::fs::remove_file(self.data_path(id, extension)?);
        }
        Ok(())
    }
}

/// Voice prompts and clips of one data folder.
#[derive(Debug, Clone)]
pub struct SpeechLibrary {
    voices: Shelf,
    clips: Shelf,
}

impl SpeechLibrary {
    pub fn new(data_dir: &Path) -> Self {
        Self { voices: Shelf { dir: data_dir.join("voices") }, clips: Shelf { dir: data_dir.join("clips") } }
    }

    /// Reads a WAV file (checked, mixed to mono, resampled to 24 kHz, cut at
    /// the prompt limit) and keeps it as voice `name`.
    pub fn add_voice(&self, name: &str, file: &Path) -> Result<Voice> {
        self.keep_voice(name, VoicePrompt::load(file)?)
    }

    /// Like [`Self::add_voice`] for uploaded bytes (`file_name` names them
    /// in errors), which may also be a voice preset (see [`Self::add_preset`]).
    pub fn add_voice_bytes(&self, name: &str, file_name: &str, bytes: &[u8]) -> Result<Voice> {
        if !is_preset(bytes) {
            return self.keep_voice(name, VoicePrompt::from_wav_bytes(bytes, file_name)?);
        }
        // Read through a file of its own until checked, then removed.
        let upload = self.voices.data_path(&new_id(), "upload")?;
        write_atomically(&upload, bytes)?;
        let added = self.add_preset(name, &upload, file_name);
        let _ = std::fs::remove_file(&upload);
        added
    }

    /// Reads a WAV file or a voice preset at `path` (its kind told by its
    /// first bytes) and keeps it as voice `name`.
    pub fn add_voice_file(&self, name: &str, path: &Path) -> Result<Voice> {
        let mut head = [0u8; 9];
        let read = std::fs::File::open(path)
            .and_then(|mut f| std::io::Read::read(&mut f, &mut head))
            .with_context(|| format!("cannot read {}", path.display()))?;
        if !is_preset(&head[..read]) {
            return self.add_voice(name, path);
        }
        self.add_preset(name, path, &path.display().to_string())
    }

    /// Checks the voice preset at `path` (every branch present, shapes
    /// consistent; which model it fits is checked when it is used) and
    /// keeps a copy as voice `name`.
    fn add_preset(&self, name: &str, path: &Path, file_name: &str) -> Result<Voice> {
        let name = valid_name(name)?;
        PresetSummary::read(path).map_err(|e| anyhow::anyhow!("{file_name}: {}", error_without_path(&e, path)))?;
        let voice = Voice {
            id: new_id(),
            name,
            kind: VoiceKind::Preset,
            duration_s: None,
            sample_rate: None,
            created_at: chrono::Utc::now().to_rfc3339(),
            notice: None,
            transcript: None,
        };
        let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        write_atomically(&self.voices.data_path(&voice.id, "preset")?, &bytes)?;
        write_json_atomically(&self.voices.paths(&voice.id)?.1, &voice)?;
        Ok(voice)
    }

    fn keep_voice(&self, name: &str, prompt: VoicePrompt) -> Result<Voice> {
        let name = valid_name(name)?;
        let audio = Audio { samples: prompt.samples, sample_rate: SAMPLE_RATE };
        let voice = Voice {
            id: new_id(),
            name,
            kind: VoiceKind::Prompt,
            duration_s: Some(audio.duration_s()),
            sample_rate: Some(SAMPLE_RATE),
            created_at: chrono::Utc::now().to_rfc3339(),
            notice: prompt.notice,
            transcript: None,
        };
        self.voices.put(&voice.id, &audio, &voice)?;
        Ok(voice)
    }

    pub fn voices(&self) -> Result<Vec<Voice>> {
        self.voices.list(|v: &Voice| &v.created_at)
    }

    pub fn voice(&self, id: &str) -> Result<Voice> {
        self.voices.get(id)
    }

    /// The voice whose id or name is `key`.
    pub fn find_voice(&self, key: &str) -> Result<Voice> {
        self.voices()?
            .into_iter()
            .find(|v| v.id == key || v.name == key)
            .with_context(|| format!("no stored voice is called `{key}`"))
    }

    /// Where voice `id`'s preset file is (an error for a prompt voice).
    pub fn preset_path(&self, id: &str) -> Result<PathBuf> {
        let voice = self.voice(id)?;
        if voice.kind != VoiceKind::Preset {
            bail!("`{}` is a WAV voice prompt, not a voice preset", voice.name);
        }
        self.voices.data_path(id, "preset")
    }

    /// A voice's samples (24 kHz).
    pub fn voice_samples(&self, id: &str) -> Result<Vec<f32>> {
        let (wav_path, _) = self.voices.paths(id)?;
        Ok(wav::read(&wav_path, f64::INFINITY)?.audio.samples)
    }

    /// Sets (or, with blank text, clears) what prompt voice `id` says.
    pub fn set_transcript(&self, id: &str, transcript: &str) -> Result<Voice> {
        let mut voice = self.voice(id)?;
        if voice.kind != VoiceKind::Prompt {
            bail!("`{}` is a voice preset: it has no audio to transcribe", voice.name);
        }
        let transcript = transcript.split_whitespace().collect::<Vec<_>>().join(" ");
        if transcript.chars().count() > MAX_TRANSCRIPT_CHARS {
            bail!("a transcript holds at most {MAX_TRANSCRIPT_CHARS} characters");
        }
        voice.transcript = (!transcript.is_empty()).then_some(transcript);
        write_json_atomically(&self.voices.paths(id)?.1, &voice)?;
        Ok(voice)
    }

    /// A prompt voice's samples (24 kHz) and its transcript, which must be set.
    pub fn transcribed_prompt(&self, id: &str) -> Result<(Vec<f32>, String)> {
        let voice = self.voice(id)?;
        let Some(transcript) = voice.transcript else {
            bail!(
                "`{}` has no transcript: LuxTTS needs the words the voice prompt says (add them to the voice)",
                voice.name
            );
        };
        Ok((self.voice_samples(id)?, transcript))
    }

    pub fn voice_wav(&self, id: &str) -> Result<Vec<u8>> {
        self.voices.audio_bytes(id)
    }

    pub fn delete_voice(&self, id: &str) -> Result<()> {
        self.voices.delete(id)
    }

    /// Keeps generated speech as a clip (its id is made here).
    pub fn add_clip(&self, mut clip: Clip, audio: &Audio) -> Result<Clip> {
        clip.id = new_id();
        clip.created_at = chrono::Utc::now().to_rfc3339();
        self.clips.put(&clip.id, audio, &clip)?;
        Ok(clip)
    }

    pub fn clips(&self) -> Result<Vec<Clip>> {
        self.clips.list(|c: &Clip| &c.created_at)
    }

    pub fn clip_wav(&self, id: &str) -> Result<Vec<u8>> {
        self.clips.audio_bytes(id)
    }

    pub fn delete_clip(&self, id: &str) -> Result<()> {
        self.clips.delete(id)
    }
}
