//! Voice prompts: a WAV file of someone speaking, read as mono audio at the
//! speech models' 24 kHz and cut to a length the model can take.

use crate::audio::wav;
use anyhow::Result;
use std::path::Path;

/// The sample rate speech models work at.
pub const SAMPLE_RATE: u32 = 24_000;

/// Longer prompts are cut to this many seconds (with a notice).
pub const MAX_PROMPT_SECONDS: f64 = 60.0;

/// A voice prompt ready for a model.
#[derive(Debug, Clone)]
pub struct VoicePrompt {
    /// 24 kHz mono samples.
    pub samples: Vec<f32>,
    /// Set when the file was longer than [`MAX_PROMPT_SECONDS`] and was cut.
    pub notice: Option<String>,
}

impl VoicePrompt {
    /// Reads `path` (any WAV the audio module reads), resampled to 24 kHz.
    pub fn load(path: &Path) -> Result<Self> {
        Self::from_input(wav::read(path, MAX_PROMPT_SECONDS)?, &path.display().to_string())
    }

    /// Reads WAV bytes (an upload), named `origin` in messages.
    pub fn from_wav_bytes(bytes: &[u8], origin: &str) -> Result<Self> {
        Self::from_input(wav::read_from(std::io::Cursor::new(bytes), origin, MAX_PROMPT_SECONDS)?, origin)
    }

    fn from_input(input: wav::WavInput, origin: &str) -> Result<Self> {
        let notice = input.truncated_from_s.map(|length| {
            format!(
                "{origin}: the voice prompt is {length:.1} s long; only its first {MAX_PROMPT_SECONDS:.0} s are used"
            )
        });
        Ok(Self { samples: input.audio.resampled(SAMPLE_RATE)?.samples, notice })
    }
}
