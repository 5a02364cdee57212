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
        let input = wav::read(path, MAX_PROMPT_SECONDS)?;
        let notice = input.truncated_from_s.map(|length| {
            format!("{}: the voice prompt is {length:.1} s long; only its first {MAX_PROMPT_SECONDS:.0} s are used", path.display())
        });
        Ok(Self {
            samples: input.audio.resampled(SAMPLE_RATE)?.samples,
            notice,
        })
    }
}
