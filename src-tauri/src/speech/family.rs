//! Which speech model a folder holds, told from its `config.json`, and
//! what each one speaks in, makes and starts from.

use super::luxtts::config::LuxConfig;
use super::vibevoice::config::{RealtimeConfig, Variant, VibeVoiceConfig};
use super::vibevoice::generate::SpeechSettings;
use anyhow::Result;
use serde::{Deserialize, Serialize};

/// The speech models Cake runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpeechFamily {
    /// VibeVoice-1.5B: scripts of up to four speakers.
    VibeVoice,
    /// VibeVoice-Realtime-0.5B: one voice preset, speech as the text is read.
    VibeVoiceRealtime,
    /// LuxTTS (ZipVoice-Distill): one voice from a prompt and its transcript.
    LuxTts,
}

/// What a speech model speaks in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VoiceKind {
    /// WAV voice prompts, one per speaker (VibeVoice-1.5B).
    #[default]
    Prompt,
    /// One voice preset: a model state saved after a voice's prompt
    /// (VibeVoice-Realtime-0.5B).
    Preset,
    /// One WAV voice prompt and the words it says (LuxTTS). Stored voices
    /// are prompts (with a transcript or not) or presets, never this.
    TranscribedPrompt,
}

impl SpeechFamily {
    /// The family `config_text` (a `config.json`) describes, if it is a
    /// speech model's. LuxTTS's config has no `model_type`: it is told by
    /// its vocos features and its flow-matching decoder's shape.
    pub fn of_config(config_text: &str) -> Option<Self> {
        if let Some(variant) = Variant::of_config(config_text) {
            return Some(match variant {
                Variant::Standard => Self::VibeVoice,
                Variant::Realtime => Self::VibeVoiceRealtime,
            });
        }
        let value: serde_json::Value = serde_json::from_str(config_text).ok()?;
        let vocos = value["feature"]["type"] == "vocos";
        (vocos && value["model"]["fm_decoder_dim"].is_u64()).then_some(Self::LuxTts)
    }

    /// Checks that `config_text` is a whole, usable config of this family.
    pub fn check_config(self, config_text: &str) -> Result<()> {
        match self {
            Self::VibeVoice => VibeVoiceConfig::parse(config_text).map(drop),
            Self::VibeVoiceRealtime => RealtimeConfig::parse(config_text).map(drop),
            Self::LuxTts => LuxConfig::parse(config_text).map(drop),
        }
    }

    /// The name shown in the model list's architecture column.
    pub fn architecture(self) -> &'static str {
        match self {
            Self::VibeVoice => "vibevoice",
            Self::VibeVoiceRealtime => "vibevoice_streaming",
            Self::LuxTts => "luxtts",
        }
    }

    /// The model's name for messages.
    pub fn name(self) -> &'static str {
        match self {
            Self::VibeVoice => "VibeVoice-1.5B",
            Self::VibeVoiceRealtime => "VibeVoice-Realtime",
            Self::LuxTts => "LuxTTS",
        }
    }

    pub fn voice_kind(self) -> VoiceKind {
        match self {
            Self::VibeVoice => VoiceKind::Prompt,
            Self::VibeVoiceRealtime => VoiceKind::Preset,
            Self::LuxTts => VoiceKind::TranscribedPrompt,
        }
    }

    /// The rate of the audio the model makes.
    pub fn sample_rate(self) -> u32 {
        match self {
            Self::VibeVoice | Self::VibeVoiceRealtime => 24_000,
            Self::LuxTts => 48_000,
        }
    }

    /// The reference demos' settings: guidance 1.3 and 10 diffusion steps
    /// for VibeVoice-1.5B, 1.5 and 5 for Realtime, 3.0 and 4 flow steps for
    /// LuxTTS.
    pub fn default_settings(self) -> SpeechSettings {
        let (cfg_scale, steps) = match self {
            Self::VibeVoice => (1.3, 10),
            Self::VibeVoiceRealtime => (1.5, 5),
            Self::LuxTts => (3.0, 4),
        };
        SpeechSettings { cfg_scale, steps, max_seconds: None }
    }
}

impl VoiceKind {
    /// The family that speaks in this kind of voice (each kind has one).
    pub fn family(self) -> SpeechFamily {
        match self {
            Self::Prompt => SpeechFamily::VibeVoice,
            Self::Preset => SpeechFamily::VibeVoiceRealtime,
            Self::TranscribedPrompt => SpeechFamily::LuxTts,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_are_told_from_their_configs() {
        let lux = include_str!("../../../tests/fixtures/luxtts/config.json");
        assert_eq!(SpeechFamily::of_config(lux), Some(SpeechFamily::LuxTts));
        assert!(SpeechFamily::LuxTts.check_config(lux).is_ok());
        assert_eq!(SpeechFamily::of_config(r#"{"model_type": "vibevoice"}"#), Some(SpeechFamily::VibeVoice));
        assert_eq!(
            SpeechFamily::of_config(r#"{"model_type": "vibevoice_streaming"}"#),
            Some(SpeechFamily::VibeVoiceRealtime)
        );
        for family in [SpeechFamily::VibeVoice, SpeechFamily::VibeVoiceRealtime, SpeechFamily::LuxTts] {
            assert_eq!(family.voice_kind().family(), family);
        }
        for other in [r#"{"model_type": "llama"}"#, r#"{"feature": {"type": "vocos"}}"#, "not json"] {
            assert_eq!(SpeechFamily::of_config(other), None, "{other}");
        }
    }
}
