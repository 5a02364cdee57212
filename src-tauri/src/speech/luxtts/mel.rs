//! The prompt's audio features (docs/luxtts-research.md §5, ZipVoice's
//! `VocosFbank`): the log of a 100-band HTK mel spectrogram of 24 kHz
//! audio's magnitudes (1024-point periodic Hann windows every 256 samples,
//! centred, the signal reflected at its ends), one frame per 256 samples.

use super::window::hann;
use anyhow::{bail, Result};
use candle_core::{Device, Tensor};
use realfft::RealFftPlanner;

pub const SAMPLE_RATE: u32 = 24_000;
const FFT_SIZE: usize = 1024;
pub const HOP: usize = 256;
pub const MEL_BANDS: usize = 100;
/// Magnitudes are clamped to this before the logarithm.
const FLOOR: f64 = 1e-7;

/// What LuxTTS scales the prompt to when it is quieter (its `rms_norm`),
/// and the prompt's own level, which the output is scaled back to.
pub struct Loudness {
    pub samples: Vec<f32>,
    pub prompt_rms: f32,
}

/// `samples` raised to `target` RMS if quieter than that, as LuxTTS
/// prepares a prompt.
pub fn raise_to_rms(samples: &[f32], target: f32) -> Loudness {
    let mean_square = samples.iter().map(|&s| s as f64 * s as f64).sum::<f64>() / samples.len().max(1) as f64;
    let prompt_rms = mean_square.sqrt() as f32;
    let samples = if prompt_rms < target && prompt_rms > 0.0 {
        samples.iter().map(|&s| s * target / prompt_rms).collect()
    } else {
        samples.to_vec()
    };
    Loudness { samples, prompt_rms }
}

/// The triangular filters of `MEL_BANDS` bands evenly spaced on the HTK
/// mel scale from 0 Hz to half the rate, over the FFT's bins:
/// `filters[bin * MEL_BANDS + band]` (torchaudio's, without normalisation).
fn mel_filters() -> Vec<f64> {
    let bins = FFT_SIZE / 2 + 1;
    let to_mel = |hz: f64| 2595.0 * (1.0 + hz / 700.0).log10();
    let to_hz = |mel: f64| 700.0 * (10f64.powf(mel / 2595.0) - 1.0);
    let top = (SAMPLE_RATE / 2) as f64;
    let edges: Vec<f64> = (0..MEL_BANDS + 2).map(|i| to_hz(to_mel(top) * i as f64 / (MEL_BANDS + 1) as f64)).collect();
    let mut filters = vec![0.0; bins * MEL_BANDS];
    for bin in 0..bins {
        let hz = top * bin as f64 / (bins - 1) as f64;
        for band in 0..MEL_BANDS {
            let (low, centre, high) = (edges[band], edges[band + 1], edges[band + 2]);
            let rising = (hz - low) / (centre - low);
            let falling = (high - hz) / (high - centre);
            filters[bin * MEL_BANDS + band] = rising.min(falling).max(0.0);
        }
    }
    filters
}

/// The log-mel features of 24 kHz `samples`: `((n + 128) / 256, 100)`.
pub fn log_mel(samples: &[f32], device: &Device) -> Result<Tensor> {
    let half = FFT_SIZE / 2;
    let n = samples.len();
    if n <= half {
        bail!("{n} samples is too short a prompt: more than {half} ({} ms) are needed", half * 1000 / 24_000);
    }
    // Reflect (without repeating the end samples) by half a window each side.
    let padded: Vec<f64> = (0..n + 2 * half)
        .map(|i| {
            let at = i as isize - half as isize;
            let at = if at < 0 {
                -at
            } else if at >= n as isize {
                2 * (n as isize - 1) - at
            } else {
                at
            };
            samples[at as usize] as f64
        })
        .collect();
    let window = hann(FFT_SIZE);
    let filters = mel_filters();
    let fft = RealFftPlanner::<f64>::new().plan_fft_forward(FFT_SIZE);
    let (mut frame, mut spectrum) = (fft.make_input_vec(), fft.make_output_vec());
    let computed = 1 + n / HOP;
    let wanted = (n + HOP / 2) / HOP;
    let mut features = Vec::with_capacity(wanted * MEL_BANDS);
    for t in 0..computed.min(wanted) {
        for ((slot, &value), &w) in frame.iter_mut().zip(&padded[t * HOP..t * HOP + FFT_SIZE]).zip(&window) {
            *slot = value * w;
        }
        fft.process(&mut frame, &mut spectrum)?;
        let mut bands = [0f64; MEL_BANDS];
        for (bin, value) in spectrum.iter().enumerate() {
            let magnitude = value.norm();
            for (band, filter) in bands.iter_mut().zip(&filters[bin * MEL_BANDS..(bin + 1) * MEL_BANDS]) {
                *band += magnitude * filter;
            }
        }
        features.extend(bands.iter().map(|&b| b.max(FLOOR).ln() as f32));
    }
    // Lhotse's frame count: one frame more than computed repeats the last.
    while features.len() < wanted * MEL_BANDS {
        let last = features[features.len() - MEL_BANDS..].to_vec();
        features.extend(last);
    }
    Ok(Tensor::from_vec(features, (wanted, MEL_BANDS), device)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tone_lights_the_band_of_its_frequency() {
        let samples: Vec<f32> =
            (0..24_000).map(|i| (2.0 * std::f32::consts::PI * 1000.0 * i as f32 / 24_000.0).sin()).collect();
        let mel = log_mel(&samples, &Device::Cpu).unwrap().to_vec2::<f32>().unwrap();
        assert_eq!(mel.len(), (24_000 + 128) / 256);
        let middle = &mel[40];
        let loudest = (0..MEL_BANDS).max_by(|&a, &b| middle[a].total_cmp(&middle[b])).unwrap();
        // 1 kHz lies at 1000 mel on the HTK scale, 12 kHz at 3266: the band
        // centred there is the 1000 / (3266 / 101) − 1 ≈ 30th.
        assert!((29..=31).contains(&loudest), "loudest band {loudest}");
    }

    #[test]
    fn quiet_prompts_are_raised_and_loud_ones_kept() {
        let quiet = raise_to_rms(&[0.01, -0.01], 0.1);
        assert!((quiet.prompt_rms - 0.01).abs() < 1e-7 && (quiet.samples[0] - 0.1).abs() < 1e-6);
        let loud = raise_to_rms(&[0.5, -0.5], 0.1);
        assert_eq!(loud.samples, vec![0.5, -0.5]);
    }
}
