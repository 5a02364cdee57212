//! Turning a script and voice prompts into VibeVoice's prompt
//! (docs/vibevoice.md §5): a system line, one voice section per speaker
//! with a slot per latent frame of its voice, the script, and the start of
//! the speech output.

use crate::text::tokenizer::TextTokenizer;
use anyhow::{bail, Context, Result};

/// At most this many speakers in one script.
pub const MAX_SPEAKERS: usize = 4;

const SYSTEM: &str = " Transform the text provided by various speakers into speech output, utilizing the distinct voice of each respective speaker.\n";

/// The special tokens VibeVoice borrows from Qwen's vision tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpeechTokens {
    pub start: u32,
    pub end: u32,
    /// One latent frame of speech.
    pub diffusion: u32,
    pub eos: u32,
}

impl SpeechTokens {
    /// Looks the tokens up in `tokenizer`.
    pub fn from_tokenizer(tokenizer: &TextTokenizer) -> Result<Self> {
        let id = |name: &str| {
            tokenizer
                .token_id(name)
                .with_context(|| format!("the tokenizer lacks `{name}`: VibeVoice needs Qwen2.5's tokenizer.json"))
        };
        Ok(Self {
            start: id("<|vision_start|>")?,
            end: id("<|vision_end|>")?,
            diffusion: id("<|vision_pad|>")?,
            eos: id("<|endoftext|>")?,
        })
    }
}

/// One line of a script: who speaks, and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptLine {
    /// Speaker index (0-based after the shift described in [`parse_script`]).
    pub speaker: usize,
    pub text: String,
}

/// Parses `Speaker N: text` lines (case-insensitive; other lines are
/// skipped). When no speaker is numbered 0, numbers are shifted down by one
/// (so "Speaker 1" and "Speaker 2" become 0 and 1), as the reference does.
pub fn parse_script(script: &str) -> Result<Vec<ScriptLine>> {
    let mut lines = Vec::new();
    for line in script.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let lower = line.to_ascii_lowercase();
        let Some(rest) = lower.strip_prefix("speaker") else { continue };
        let rest_original = &line[line.len() - rest.len()..];
        let trimmed = rest_original.trim_start();
        let digits: String = trimmed.chars().take_while(|c| c.is_ascii_digit()).collect();
        if digits.is_empty() || rest_original.len() == trimmed.len() {
            continue;
        }
        let after = trimmed[digits.len()..].trim_start();
        let Some(text) = after.strip_prefix(':') else { continue };
        let speaker: usize = digits.parse().with_context(|| format!("speaker number `{digits}` is too large"))?;
        lines.push(ScriptLine { speaker, text: format!(" {}", text.trim()) });
    }
    if lines.is_empty() {
        bail!("the script has no lines of the form `Speaker 1: text`");
    }
    if lines.iter().all(|l| l.speaker > 0) {
        for line in &mut lines {
            line.speaker -= 1;
        }
    }
    let mut speakers: Vec<usize> = lines.iter().map(|l| l.speaker).collect();
    speakers.sort_unstable();
    speakers.dedup();
    if speakers.len() > MAX_SPEAKERS {
        bail!("the script has {} speakers; at most {MAX_SPEAKERS} are supported", speakers.len());
    }
    Ok(lines)
}

/// `text` as a script: unchanged if it has `Speaker N:` lines, else one
/// speaker saying all of it.
pub fn as_script(text: &str) -> String {
    if text.lines().any(|l| l.trim_start().to_ascii_lowercase().starts_with("speaker")) {
        text.to_string()
    } else {
        format!("Speaker 1: {}", text.split_whitespace().collect::<Vec<_>>().join(" "))
    }
}

/// How many distinct speakers a parsed script has.
pub fn speaker_count(lines: &[ScriptLine]) -> usize {
    let mut speakers: Vec<usize> = lines.iter().map(|l| l.speaker).collect();
    speakers.sort_unstable();
    speakers.dedup();
    speakers.len()
}

/// Scales a voice prompt to −25 dBFS RMS (and below full scale), in f32.
pub fn normalize_voice(samples: &[f32]) -> Vec<f32> {
    let target = 10f32.powf(-25.0 / 20.0);
    let rms = (samples.iter().map(|x| x * x).sum::<f32>() / samples.len().max(1) as f32).sqrt();
    let gain = target / (rms + 1e-6);
    let mut out: Vec<f32> = samples.iter().map(|x| x * gain).collect();
    let peak = out.iter().fold(0f32, |m, x| m.max(x.abs()));
    if peak > 1.0 {
        for x in &mut out {
            *x /= peak + 1e-6;
        }
    }
    out
}

/// A prompt ready for the model.
#[derive(Debug, Clone, PartialEq)]
pub struct SpeechPrompt {
    pub input_ids: Vec<u32>,
    /// Positions of the voice frames' slots, voice by voice.
    pub speech_positions: Vec<usize>,
    /// The normalised voice prompts (24 kHz), one per speaker in order.
    pub voices: Vec<Vec<f32>>,
    /// Latent frames of each voice (`ceil(len / hop)`).
    pub voice_frames: Vec<usize>,
}

/// Builds the prompt for `lines` spoken by `voices` (24 kHz mono, one per
/// speaker, in speaker order; extra voices are ignored).
pub fn build_prompt(
    tokenizer: &TextTokenizer,
    tokens: SpeechTokens,
    lines: &[ScriptLine],
    voices: &[Vec<f32>],
    hop: usize,
) -> Result<SpeechPrompt> {
    let speakers = speaker_count(lines);
    if voices.len() < speakers {
        bail!(
            "the script has {speakers} speakers but {} voice prompt(s) were given: one per speaker is needed",
            voices.len()
        );
    }
    let encode = |text: &str| tokenizer.encode(text, false);
    let mut ids = encode(SYSTEM)?;
    let mut speech_positions = Vec::new();
    let mut used_voices = Vec::new();
    let mut voice_frames = Vec::new();
    ids.extend(encode(" Voice input:\n")?);
    for (k, voice) in voices.iter().take(speakers).enumerate() {
        if voice.is_empty() {
            bail!("voice prompt {} is empty", k + 1);
        }
        let frames = voice.len().div_ceil(hop);
        ids.extend(encode(&format!(" Speaker {k}:"))?);
        ids.push(tokens.start);
        speech_positions.extend(ids.len()..ids.len() + frames);
        ids.extend(std::iter::repeat_n(tokens.diffusion, frames));
        ids.push(tokens.end);
        ids.extend(encode("\n")?);
        used_voices.push(normalize_voice(voice));
        voice_frames.push(frames);
    }
    ids.extend(encode(" Text input:\n")?);
    for line in lines {
        ids.extend(encode(&format!(" Speaker {}:{}\n", line.speaker, line.text))?);
    }
    ids.extend(encode(" Speech output:\n")?);
    ids.push(tokens.start);
    Ok(SpeechPrompt { input_ids: ids, speech_positions, voices: used_voices, voice_frames })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripts_are_parsed_like_the_reference() {
        let lines =
            parse_script("Speaker 1: Hello there!\n\nnarration without a speaker\nspeaker 2 :  Hi.\nSPEAKER 1:again")
                .unwrap();
        assert_eq!(
            lines,
            vec![
                ScriptLine { speaker: 0, text: " Hello there!".into() },
                ScriptLine { speaker: 1, text: " Hi.".into() },
                ScriptLine { speaker: 0, text: " again".into() },
            ]
        );
        assert_eq!(parse_script("Speaker 0: a\nSpeaker 1: b").unwrap()[1].speaker, 1);
        assert!(parse_script("just text").is_err());
        assert!(parse_script("Speaker 1: a\nSpeaker 2: b\nSpeaker 3: c\nSpeaker 4: d\nSpeaker 5: e").is_err());
    }

    #[test]
    fn voices_are_brought_to_minus_25_dbfs() {
        let loud: Vec<f32> = (0..2400).map(|i| (i as f32 * 0.05).sin() * 0.9).collect();
        let out = normalize_voice(&loud);
        let rms = (out.iter().map(|x| x * x).sum::<f32>() / out.len() as f32).sqrt();
        assert!((20.0 * rms.log10() + 25.0).abs() < 0.01);
    }
}
