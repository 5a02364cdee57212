//! How LinaCodec joins its two outputs (docs/luxtts-research.md §6): the
//! 24 kHz head's audio is doubled in rate by torchaudio's windowed-sinc
//! interpolation, then the whole utterance's spectrum is taken from it
//! below a cutoff and from the 48 kHz head above, with a short smooth
//! crossfade between.

use anyhow::{bail, Result};
use realfft::RealFftPlanner;

/// Zero crossings of the sinc on each side (torchaudio's default).
const SINC_ZEROS: f64 = 6.0;
/// The interpolation's cutoff, as a fraction of the lower Nyquist rate.
const ROLLOFF: f64 = 0.99;
/// Bins the crossfade spans.
const TRANSITION_BINS: usize = 8;

/// The two filters (one per output phase) that double a signal's rate:
/// torchaudio's `sinc_interp_hann` kernel for 1 → 2, `2·width + 1` taps.
fn doubling_kernels() -> (Vec<[f64; 2]>, usize) {
    let width = (SINC_ZEROS / ROLLOFF).ceil() as usize;
    let taps = (0..2 * width + 1)
        .map(|m| {
            let tap = |phase: usize| {
                let t = ((m as f64 - width as f64) - phase as f64 / 2.0) * ROLLOFF;
                let t = t.clamp(-SINC_ZEROS, SINC_ZEROS);
                let window = (t * std::f64::consts::PI / SINC_ZEROS / 2.0).cos().powi(2);
                let t = t * std::f64::consts::PI;
                let sinc = if t == 0.0 { 1.0 } else { t.sin() / t };
                // torchaudio keeps its kernel in f32.
                (sinc * window * ROLLOFF) as f32 as f64
            };
            [tap(0), tap(1)]
        })
        .collect();
    (taps, width)
}

/// `samples` at twice the rate: output `2i + phase` is the phase's filter
/// over inputs `i − width … i + width`, zero beyond the ends.
pub fn double_rate(samples: &[f32]) -> Vec<f32> {
    let (kernels, width) = doubling_kernels();
    let n = samples.len();
    let mut out = Vec::with_capacity(2 * n);
    for i in 0..n {
        let mut sums = [0f64; 2];
        for (m, taps) in kernels.iter().enumerate() {
            let Some(source) = (i + m).checked_sub(width).filter(|&s| s < n) else { continue };
            let value = samples[source] as f64;
            sums[0] += taps[0] * value;
            sums[1] += taps[1] * value;
        }
        out.extend(sums.map(|s| s as f32));
    }
    out
}

/// The weight of the high band at each of `bins` bins: 0 below the cutoff,
/// a cubic smoothstep over [`TRANSITION_BINS`], 1 above.
fn high_band_weights(bins: usize, cutoff_hz: f64, sample_rate: f64) -> Vec<f64> {
    let cutoff_bin = (cutoff_hz / (sample_rate / 2.0) * bins as f64) as usize;
    let start = cutoff_bin.saturating_sub(TRANSITION_BINS / 2);
    let end = (cutoff_bin + TRANSITION_BINS / 2).min(bins);
    let width = end.saturating_sub(start);
    (0..bins)
        .map(|bin| {
            if bin < start {
                0.0
            } else if bin >= end {
                1.0
            } else {
                // torch.linspace(-1, 1, width), shifted to 0..1.
                let x = if width == 1 { -1.0 } else { -1.0 + 2.0 * (bin - start) as f64 / (width - 1) as f64 };
                let u = (x + 1.0) / 2.0;
                3.0 * u * u - 2.0 * u * u * u
            }
        })
        .collect()
}

/// `high` above `cutoff_hz` and `low` below it, both at `sample_rate` and
/// of the same length, joined in the spectrum of the whole signal.
pub fn merge_bands(high: &[f32], low: &[f32], cutoff_hz: f64, sample_rate: f64) -> Result<Vec<f32>> {
    let n = high.len();
    if n != low.len() || n < 2 {
        bail!("bands of {} and {} samples cannot be merged", n, low.len());
    }
    let mut planner = RealFftPlanner::<f64>::new();
    let (forward, inverse) = (planner.plan_fft_forward(n), planner.plan_fft_inverse(n));
    let spectrum = |samples: &[f32]| -> Result<Vec<realfft::num_complex::Complex<f64>>> {
        let mut input: Vec<f64> = samples.iter().map(|&s| s as f64).collect();
        let mut output = forward.make_output_vec();
        forward.process(&mut input, &mut output)?;
        Ok(output)
    };
    let (high_spectrum, low_spectrum) = (spectrum(high)?, spectrum(low)?);
    let weights = high_band_weights(high_spectrum.len(), cutoff_hz, sample_rate);
    let mut merged: Vec<_> =
        high_spectrum.iter().zip(&low_spectrum).zip(&weights).map(|((&h, &l), &w)| h * w + l * (1.0 - w)).collect();
    merged[0].im = 0.0;
    if n.is_multiple_of(2) {
        let last = merged.len() - 1;
        merged[last].im = 0.0;
    }
    let mut out = inverse.make_output_vec();
    inverse.process(&mut merged, &mut out)?;
    Ok(out.iter().map(|&s| (s / n as f64) as f32).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubling_keeps_a_low_tone_and_interleaves_the_originals() {
        let tone: Vec<f32> =
            (0..2400).map(|i| (2.0 * std::f32::consts::PI * 440.0 * i as f32 / 24_000.0).sin()).collect();
        let doubled = double_rate(&tone);
        assert_eq!(doubled.len(), 4800);
        for (i, &value) in doubled.iter().enumerate().take(4600).skip(200) {
            let expected = (2.0 * std::f32::consts::PI * 440.0 * i as f32 / 48_000.0).sin();
            assert!((value - expected).abs() < 0.02, "sample {i}: {value} against {expected}");
        }
    }

    #[test]
    fn merging_a_signal_with_itself_gives_it_back() {
        let signal: Vec<f32> = (0..1000).map(|i| ((i * 37 % 101) as f32 / 50.0) - 1.0).collect();
        let merged = merge_bands(&signal, &signal, 12_000.0, 48_000.0).unwrap();
        for (a, b) in merged.iter().zip(&signal) {
            assert!((a - b).abs() < 1e-5);
        }
    }
}
