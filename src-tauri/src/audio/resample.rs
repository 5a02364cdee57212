//! Sample-rate conversion with rubato's FFT resampler: band-limited (an
//! anti-aliasing filter cuts what the lower rate cannot hold), with its
//! start-up delay trimmed so that output and input line up.

use anyhow::{anyhow, Result};
use rubato::audioadapter_buffers::direct::InterleavedSlice;
use rubato::{Fft, FixedSync, Resampler};

/// Input frames per FFT chunk (any size works; this keeps the delay short).
const CHUNK: usize = 1024;

/// `samples` (mono) at `from` Hz, resampled to `to` Hz.
pub fn resample(samples: &[f32], from: u32, to: u32) -> Result<Vec<f32>> {
    if from == to || samples.is_empty() {
        return Ok(samples.to_vec());
    }
    let mut resampler = Fft::<f32>::new(from as usize, to as usize, CHUNK, 1, FixedSync::Input)
        .map_err(|e| anyhow!("cannot resample {from} Hz to {to} Hz: {e}"))?;
    let input = InterleavedSlice::new(samples, 1, samples.len()).map_err(|e| anyhow!("resampling: {e}"))?;
    let needed = resampler.process_all_needed_output_len(samples.len());
    let mut output = vec![0f32; needed];
    let mut output_adapter =
        InterleavedSlice::new_mut(&mut output, 1, needed).map_err(|e| anyhow!("resampling: {e}"))?;
    let (_, produced) = resampler
        .process_all_into_buffer(&input, &mut output_adapter, samples.len(), None)
        .map_err(|e| anyhow!("resampling {from} Hz to {to} Hz failed: {e}"))?;
    output.truncate(produced);
    Ok(output)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sine(freq: f32, rate: u32, seconds: f32) -> Vec<f32> {
        let n = (rate as f32 * seconds) as usize;
        (0..n).map(|i| (2.0 * std::f32::consts::PI * freq * i as f32 / rate as f32).sin() * 0.5).collect()
    }

    /// Amplitude of `freq` in `x` (a single-bin DFT).
    fn amplitude(x: &[f32], freq: f32, rate: u32) -> f32 {
        let (mut re, mut im) = (0f64, 0f64);
        for (i, v) in x.iter().enumerate() {
            let phase = 2.0 * std::f64::consts::PI * freq as f64 * i as f64 / rate as f64;
            re += *v as f64 * phase.cos();
            im += *v as f64 * phase.sin();
        }
        (2.0 * (re * re + im * im).sqrt() / x.len() as f64) as f32
    }

    #[test]
    fn a_tone_keeps_its_pitch_level_and_timing() {
        for (from, to) in [(44_100, 24_000), (16_000, 24_000), (48_000, 24_000), (22_050, 24_000)] {
            let input = sine(440.0, from, 1.0);
            let output = resample(&input, from, to).unwrap();
            let expected = (input.len() as f64 * to as f64 / from as f64).ceil() as usize;
            assert!(output.len().abs_diff(expected) <= 1, "{from}->{to}: {} vs {expected}", output.len());
            // Compare away from the edges, where the filter rings.
            let middle = &output[to as usize / 10..to as usize * 9 / 10];
            let level = amplitude(middle, 440.0, to);
            assert!((level - 0.5).abs() < 0.01, "{from}->{to}: level {level}");
            // Aligned: the output's phase at 0.5 s matches the input's.
            let at = |x: &[f32], rate: u32| x[rate as usize / 2 + 7];
            let want = (2.0 * std::f32::consts::PI * 440.0 * (0.5 + 7.0 / to as f32)).sin() * 0.5;
            assert!((at(&output, to) - want).abs() < 0.02, "{from}->{to}: {} vs {want}", at(&output, to));
        }
    }

    #[test]
    fn frequencies_above_the_new_nyquist_are_removed() {
        // 15 kHz cannot exist at 24 kHz (Nyquist 12 kHz): it must not fold down to 9 kHz.
        let output = resample(&sine(15_000.0, 48_000, 1.0), 48_000, 24_000).unwrap();
        let middle = &output[2400..21_600];
        assert!(amplitude(middle, 9_000.0, 24_000) < 0.005);
        let rms = (middle.iter().map(|v| v * v).sum::<f32>() / middle.len() as f32).sqrt();
        assert!(rms < 0.01, "rms {rms}");
    }

    #[test]
    fn short_and_empty_inputs_work() {
        assert!(resample(&[], 44_100, 24_000).unwrap().is_empty());
        let out = resample(&[0.25; 10], 44_100, 24_000).unwrap();
        assert!(out.len() >= 5 && out.len() <= 6, "{}", out.len());
    }
}
