//! WAV files: reading any integer PCM (8, 16, 24, 32 bit) or 32-bit float
//! file, mono or multi-channel (mixed down to mono), and writing 16-bit PCM
//! mono.
//!
//! Reading is defensive: the header is checked before any sample is read,
//! samples are read one by one up to a time limit (a header that claims
//! gigabytes allocates nothing), and every problem names the file.

use super::Audio;
use anyhow::{bail, Context, Result};
use hound::{SampleFormat, WavReader, WavSpec, WavWriter};
use std::io::{Read, Seek};
use std::path::Path;

/// Sample rates accepted on input (Hz); anything outside is not real audio.
pub const MIN_SAMPLE_RATE: u32 = 1_000;
pub const MAX_SAMPLE_RATE: u32 = 384_000;
/// Channels accepted on input.
pub const MAX_CHANNELS: u16 = 32;

/// A WAV file read as mono audio.
#[derive(Debug, Clone)]
pub struct WavInput {
    pub audio: Audio,
    /// Channels in the file (mixed down to one).
    pub channels: u16,
    /// The file's length in seconds when it was cut at the limit.
    pub truncated_from_s: Option<f64>,
}

/// Reads `path`, keeping at most `max_seconds` of it.
pub fn read(path: &Path, max_seconds: f64) -> Result<WavInput> {
    let file = std::fs::File::open(path).with_context(|| format!("{}: cannot open", path.display()))?;
    read_from(std::io::BufReader::new(file), &path.display().to_string(), max_seconds)
}

/// Reads WAV bytes from `source` (named `origin` in errors), keeping at
/// most `max_seconds`.
pub fn read_from<R: Read>(source: R, origin: &str, max_seconds: f64) -> Result<WavInput> {
    let mut reader = WavReader::new(source).map_err(|e| describe_open_error(origin, e))?;
    let spec = reader.spec();
    check_spec(origin, &spec)?;
    let channels = usize::from(spec.channels);
    let claimed_frames = reader.duration() as usize;
    if claimed_frames == 0 {
        bail!("{origin}: the file holds no audio (zero samples)");
    }
    let limit_frames = (max_seconds.max(0.0) * spec.sample_rate as f64) as usize;
    let frames_to_read = claimed_frames.min(limit_frames);
    let scale = match spec.sample_format {
        SampleFormat::Float => 1.0,
        SampleFormat::Int => 1.0 / (1u64 << (spec.bits_per_sample - 1)) as f32,
    };
    let mut samples = Vec::new();
    let mut frame_sum = 0f32;
    let mut in_frame = 0usize;
    let mut read_sample = |value: f32| {
        frame_sum += value;
        in_frame += 1;
        if in_frame == channels {
            samples.push(frame_sum / channels as f32);
            frame_sum = 0.0;
            in_frame = 0;
        }
    };
    let wanted = frames_to_read * channels;
    let truncated = |read: usize| {
        format!(
            "{origin}: the file is truncated (its header promises {claimed_frames} frames, it ends after {})",
            read / channels
        )
    };
    match spec.sample_format {
        SampleFormat::Float => {
            for (index, sample) in reader.samples::<f32>().take(wanted).enumerate() {
                let value = sample.with_context(|| truncated(index))?;
                if !value.is_finite() {
                    bail!("{origin}: sample {index} is not a finite number");
                }
                read_sample(value);
            }
        }
        SampleFormat::Int => {
            for (index, sample) in reader.samples::<i32>().take(wanted).enumerate() {
                let value = sample.with_context(|| truncated(index))?;
                read_sample(value as f32 * scale);
            }
        }
    }
    if samples.is_empty() {
        bail!("{origin}: the file holds no audio (zero samples)");
    }
    Ok(WavInput {
        audio: Audio { samples, sample_rate: spec.sample_rate },
        channels: spec.channels,
        truncated_from_s: (claimed_frames > frames_to_read).then(|| claimed_frames as f64 / spec.sample_rate as f64),
    })
}

fn check_spec(origin: &str, spec: &WavSpec) -> Result<()> {
    if spec.channels == 0 || spec.channels > MAX_CHANNELS {
        bail!("{origin}: {} channels is not a usable WAV file (1 to {MAX_CHANNELS} supported)", spec.channels);
    }
    if !(MIN_SAMPLE_RATE..=MAX_SAMPLE_RATE).contains(&spec.sample_rate) {
        bail!(
            "{origin}: a sample rate of {} Hz is not plausible audio (supported: {MIN_SAMPLE_RATE} to {MAX_SAMPLE_RATE} Hz)",
            spec.sample_rate
        );
    }
    match (spec.sample_format, spec.bits_per_sample) {
        (SampleFormat::Int, 8 | 16 | 24 | 32) | (SampleFormat::Float, 32) => Ok(()),
        (format, bits) => {
            bail!("{origin}: {bits}-bit {format:?} samples are not supported (use 8/16/24/32-bit PCM or 32-bit float)")
        }
    }
}

fn describe_open_error(origin: &str, error: hound::Error) -> anyhow::Error {
    match error {
        hound::Error::Unsupported => anyhow::anyhow!(
            "{origin}: unsupported WAV encoding (only integer PCM and 32-bit float are read; A-law, µ-law and compressed WAV are not)"
        ),
        hound::Error::FormatError(reason) => anyhow::anyhow!("{origin}: not a valid WAV file ({reason})"),
        hound::Error::IoError(e) if matches!(e.kind(), std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::Other) => {
            anyhow::anyhow!("{origin}: not a valid WAV file (it ends inside its header: {e})")
        }
        other => anyhow::anyhow!("{origin}: not a readable WAV file ({other})"),
    }
}

/// Writes `audio` to `path` as 16-bit PCM mono.
pub fn write(path: &Path, audio: &Audio) -> Result<()> {
    let bytes = encode(audio)?;
    crate::files::storage::write_atomically(path, &bytes)
}

/// `audio` as the bytes of a 16-bit PCM mono WAV file.
pub fn encode(audio: &Audio) -> Result<Vec<u8>> {
    let spec =
        WavSpec { channels: 1, sample_rate: audio.sample_rate, bits_per_sample: 16, sample_format: SampleFormat::Int };
    let mut bytes = std::io::Cursor::new(Vec::with_capacity(44 + audio.samples.len() * 2));
    write_to(&mut bytes, spec, &audio.samples)?;
    Ok(bytes.into_inner())
}

fn write_to<W: std::io::Write + Seek>(out: W, spec: WavSpec, samples: &[f32]) -> Result<()> {
    let mut writer = WavWriter::new(out, spec).context("cannot start a WAV file")?;
    for &sample in samples {
        writer.write_sample(to_i16(sample)).context("cannot write WAV samples")?;
    }
    writer.finalize().context("cannot finish the WAV file")
}

/// A sample as 16-bit PCM (clipped; anything not finite is silence).
fn to_i16(sample: f32) -> i16 {
    let clipped = if sample.is_finite() { sample.clamp(-1.0, 1.0) } else { 0.0 };
    (clipped * 32767.0).round() as i16
}

/// `samples` as 16-bit little-endian PCM bytes, as a WAV file holds them.
pub fn pcm16(samples: &[f32]) -> Vec<u8> {
    samples.iter().flat_map(|&s| to_i16(s).to_le_bytes()).collect()
}

/// The header of a 16-bit PCM mono WAV file whose length is not known yet
/// (a stream): both sizes are the largest possible, as players expect.
pub fn streaming_header(sample_rate: u32) -> Vec<u8> {
    let mut header = Vec::with_capacity(44);
    header.extend_from_slice(b"RIFF");
    header.extend_from_slice(&u32::MAX.to_le_bytes());
    header.extend_from_slice(b"WAVEfmt ");
    header.extend_from_slice(&16u32.to_le_bytes());
    header.extend_from_slice(&1u16.to_le_bytes()); // PCM
    header.extend_from_slice(&1u16.to_le_bytes()); // mono
    header.extend_from_slice(&sample_rate.to_le_bytes());
    header.extend_from_slice(&(sample_rate * 2).to_le_bytes()); // bytes per second
    header.extend_from_slice(&2u16.to_le_bytes()); // bytes per sample
    header.extend_from_slice(&16u16.to_le_bytes());
    header.extend_from_slice(b"data");
    header.extend_from_slice(&u32::MAX.to_le_bytes());
    header
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_streamed_wav_is_a_whole_one_but_for_its_sizes() {
        let audio = Audio { samples: vec![0.0, 0.5, -1.0, 2.0, f32::NAN, -0.25], sample_rate: 24_000 };
        let whole = encode(&audio).unwrap();
        let mut streamed = streaming_header(audio.sample_rate);
        streamed.extend(pcm16(&audio.samples));
        assert_eq!(streamed.len(), whole.len());
        let differing: Vec<usize> = (0..whole.len()).filter(|&i| streamed[i] != whole[i]).collect();
        // Only the RIFF size (bytes 4–7) and the data size (40–43) differ.
        assert!(differing.iter().all(|i| (4..8).contains(i) || (40..44).contains(i)), "{differing:?}");
        assert_eq!(&streamed[44..], &[0, 0, 0x00, 0x40, 0x01, 0x80, 0xff, 0x7f, 0, 0, 0x00, 0xe0]);
    }
}
