//! Reading and writing real WAV files: every supported encoding, channel
//! mixing, the time limit, and each kind of bad file with its error.

use cake::audio::wav::{encode, read, read_from, write};
use cake::audio::Audio;
use hound::{SampleFormat, WavSpec, WavWriter};
use std::path::{Path, PathBuf};

fn spec(channels: u16, rate: u32, bits: u16, format: SampleFormat) -> WavSpec {
    WavSpec { channels, sample_rate: rate, bits_per_sample: bits, sample_format: format }
}

/// A test signal in -1..1 (a slow sine plus a ramp, so every sample differs).
fn signal(frames: usize) -> Vec<f32> {
    (0..frames).map(|i| 0.6 * (i as f32 * 0.01).sin() + 0.3 * (i as f32 / frames as f32 - 0.5)).collect()
}

/// Writes `frames[i]` on every channel (channel c scaled by 1/(c+1)).
fn write_file(path: &Path, spec: WavSpec, frames: &[f32]) {
    let mut writer = WavWriter::create(path, spec).unwrap();
    for &value in frames {
        for channel in 0..spec.channels {
            let v = value / (channel as f32 + 1.0);
            match (spec.sample_format, spec.bits_per_sample) {
                (SampleFormat::Float, _) => writer.write_sample(v).unwrap(),
                (_, 8) => writer.write_sample((v * 127.0).round() as i8).unwrap(),
                (_, 16) => writer.write_sample((v * 32767.0).round() as i16).unwrap(),
                (_, 24) => writer.write_sample((v * 8_388_607.0).round() as i32).unwrap(),
                (_, 32) => writer.write_sample((v as f64 * 2_147_483_647.0).round() as i32).unwrap(),
                _ => unreachable!(),
            }
        }
    }
    writer.finalize().unwrap();
}

fn error_of(path: &Path) -> String {
    format!("{:#}", read(path, 60.0).expect_err("the file should be refused"))
}

#[test]
fn every_encoding_reads_back_mixed_down_to_mono() {
    let dir = tempfile::tempdir().unwrap();
    let frames = signal(4000);
    for (bits, format, tolerance) in [
        (8, SampleFormat::Int, 1.0 / 64.0),
        (16, SampleFormat::Int, 1e-4),
        (24, SampleFormat::Int, 1e-6),
        (32, SampleFormat::Int, 1e-6),
        (32, SampleFormat::Float, 1e-7),
    ] {
        for channels in [1u16, 2, 6] {
            let path = dir.path().join(format!("{bits}-{format:?}-{channels}.wav"));
            write_file(&path, spec(channels, 22_050, bits, format), &frames);
            let input = read(&path, 60.0).unwrap();
            assert_eq!(input.audio.sample_rate, 22_050);
            assert_eq!(input.channels, channels);
            assert_eq!(input.audio.samples.len(), frames.len());
            assert!(input.truncated_from_s.is_none());
            // The mix of channels scaled 1, 1/2, 1/3, … is the mean of those scales.
            let gain: f32 = (0..channels).map(|c| 1.0 / (c as f32 + 1.0)).sum::<f32>() / channels as f32;
            for (got, want) in input.audio.samples.iter().zip(&frames) {
                assert!(
                    (got - want * gain).abs() <= tolerance,
                    "{bits}-bit {format:?} x{channels}: {got} vs {}",
                    want * gain
                );
            }
        }
    }
}

#[test]
fn written_speech_is_16_bit_mono_and_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.wav");
    let audio = Audio { samples: vec![0.0, 0.5, -0.5, 1.5, -2.0, f32::NAN], sample_rate: 24_000 };
    write(&path, &audio).unwrap();
    let reader = hound::WavReader::open(&path).unwrap();
    assert_eq!(reader.spec(), spec(1, 24_000, 16, SampleFormat::Int));
    let back = read(&path, 60.0).unwrap().audio;
    let expected = [0.0, 0.5, -0.5, 1.0, -1.0, 0.0];
    for (got, want) in back.samples.iter().zip(expected) {
        assert!((got - want).abs() < 1e-4, "{got} vs {want}");
    }
    assert_eq!(encode(&audio).unwrap(), std::fs::read(&path).unwrap());
}

#[test]
fn long_prompts_are_cut_at_the_limit_with_the_original_length() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("long.wav");
    write_file(&path, spec(2, 8_000, 16, SampleFormat::Int), &signal(8_000 * 3));
    let input = read(&path, 1.0).unwrap();
    assert_eq!(input.audio.samples.len(), 8_000);
    assert_eq!(input.truncated_from_s, Some(3.0));
}

/// A 44-byte canonical header followed by `data` (format tag, channels, rate, bits given).
fn raw_wav(format_tag: u16, channels: u16, rate: u32, bits: u16, data_len: u32, data: &[u8]) -> Vec<u8> {
    let block = channels * bits.div_ceil(8);
    let mut b = Vec::new();
    b.extend(b"RIFF");
    b.extend((36 + data.len() as u32).to_le_bytes());
    b.extend(b"WAVEfmt ");
    b.extend(16u32.to_le_bytes());
    b.extend(format_tag.to_le_bytes());
    b.extend(channels.to_le_bytes());
    b.extend(rate.to_le_bytes());
    b.extend((rate * block as u32).to_le_bytes());
    b.extend(block.to_le_bytes());
    b.extend(bits.to_le_bytes());
    b.extend(b"data");
    b.extend(data_len.to_le_bytes());
    b.extend(data);
    b
}

fn bad_file(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

#[test]
fn bad_files_are_refused_with_the_file_and_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let good = raw_wav(1, 1, 16_000, 16, 8, &[0, 0, 1, 0, 2, 0, 3, 0]);
    let cases: Vec<(PathBuf, &str)> = vec![
        (bad_file(d, "text.wav", b"this is not audio at all, just some text"), "not a valid WAV file"),
        (bad_file(d, "header.wav", &good[..20]), "not a valid WAV file"),
        (bad_file(d, "empty.wav", &raw_wav(1, 1, 16_000, 16, 0, &[])), "zero samples"),
        (bad_file(d, "alaw.wav", &raw_wav(6, 1, 8_000, 8, 4, &[1, 2, 3, 4])), "unsupported WAV encoding"),
        (bad_file(d, "slow.wav", &raw_wav(1, 1, 3, 16, 4, &[0, 0, 1, 0])), "not plausible"),
        (bad_file(d, "fast.wav", &raw_wav(1, 1, 50_000_000, 16, 4, &[0, 0, 1, 0])), "not plausible"),
        // A header that promises 4 GB of samples and a file that ends at once.
        (bad_file(d, "liar.wav", &raw_wav(1, 2, 16_000, 16, 0xFFFF_FFF0, &[0, 0, 1, 0, 2, 0])), "truncated"),
        (bad_file(d, "zero-channels.wav", &raw_wav(1, 0, 16_000, 16, 4, &[0, 0, 1, 0])), "channels"),
        (bad_file(d, "nan.wav", &raw_wav(3, 1, 16_000, 32, 4, &f32::NAN.to_le_bytes())), "not a finite number"),
    ];
    for (path, expected) in cases {
        let message = error_of(&path);
        assert!(message.contains(&path.display().to_string()), "the error names the file: {message}");
        assert!(message.contains(expected), "{}: expected `{expected}` in `{message}`", path.display());
    }
    assert!(error_of(&d.join("missing.wav")).contains("cannot open"));
}

#[test]
fn bytes_from_an_upload_are_read_the_same_way() {
    let bytes = raw_wav(1, 1, 16_000, 16, 4, &[0, 64, 0, 192]);
    let input = read_from(std::io::Cursor::new(bytes), "upload", 60.0).unwrap();
    assert_eq!(input.audio.samples, vec![0.5, -0.5]);
    let err = format!("{:#}", read_from(std::io::Cursor::new(b"nope".to_vec()), "upload", 60.0).unwrap_err());
    assert!(err.starts_with("upload: "), "{err}");
}
