//! The voice prompts and speech clips the app keeps: each one a WAV file
//! (24 kHz, 16-bit mono) with a small JSON description beside it, in
//! `voices/` and `clips/` of the data folder. Writes are atomic.

use crate::audio::{wav, Audio};
use crate::files::storage::{write_atomically, write_json_atomically};
use crate::speech::voice_prompt::{VoicePrompt, SAMPLE_RATE};
use anyhow::{bail, Context, Result};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// A stored voice prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Voice {
    pub id: String,
    pub name: String,
    pub duration_s: f64,
    pub sample_rate: u32,
    pub created_at: String,
    /// Set when the file was cut to the prompt limit.
    pub notice: Option<String>,
}

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

/// A folder of `<id>.wav` + `<id>.json` pairs.
#[derive(Debug, Clone)]
struct Shelf {
    dir: PathBuf,
}

fn valid_id(id: &str) -> Result<()> {
    if id.is_empty() || id.len() > 64 || !id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
        bail!("`{id}` is not a valid id");
    }
    Ok(())
}

fn new_id() -> String {
    format!("{:x}{:08x}", chrono::Utc::now().timestamp_millis(), rand::random::<u32>())
}

impl Shelf {
    fn paths(&self, id: &str) -> Result<(PathBuf, PathBuf)> {
        valid_id(id)?;
        Ok((self.dir.join(format!("{id}.wav")), self.dir.join(format!("{id}.json"))))
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
        let (wav_path, json_path) = self.paths(id)?;
        if !json_path.exists() {
            bail!("no item `{id}`");
        }
        std::fs::remove_file(&json_path).with_context(|| format!("cannot delete {}", json_path.display()))?;
        let _ = std::fs::remove_file(wav_path);
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

    /// Like [`Self::add_voice`] for uploaded bytes (`file_name` names them in errors).
    pub fn add_voice_bytes(&self, name: &str, file_name: &str, bytes: &[u8]) -> Result<Voice> {
        self.keep_voice(name, VoicePrompt::from_wav_bytes(bytes, file_name)?)
    }

    fn keep_voice(&self, name: &str, prompt: VoicePrompt) -> Result<Voice> {
        let name = name.trim();
        if name.is_empty() || name.chars().count() > 80 {
            bail!("a voice needs a name of 1 to 80 characters");
        }
        let audio = Audio { samples: prompt.samples, sample_rate: SAMPLE_RATE };
        let voice = Voice {
            id: new_id(),
            name: name.to_string(),
            duration_s: audio.duration_s(),
            sample_rate: SAMPLE_RATE,
            created_at: chrono::Utc::now().to_rfc3339(),
            notice: prompt.notice,
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

    /// A voice's samples (24 kHz).
    pub fn voice_samples(&self, id: &str) -> Result<Vec<f32>> {
        let (wav_path, _) = self.voices.paths(id)?;
        Ok(wav::read(&wav_path, f64::INFINITY)?.audio.samples)
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
