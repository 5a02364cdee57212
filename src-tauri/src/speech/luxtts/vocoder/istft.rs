//! Vocos's ISTFT head: a linear layer predicts each frame's log-magnitudes
//! and phases, and an inverse STFT (periodic Hann windows, overlap-added
//! and divided by the windows' summed squares) turns them into samples.

use super::config::{HeadShape, Padding};
use crate::models::nn::linear::Linear;
use crate::models::weights::Weights;
use crate::speech::luxtts::window::hann;
use anyhow::{bail, Result};
use candle_core::Tensor;
use realfft::num_complex::Complex;
use realfft::RealFftPlanner;

/// Magnitudes are clipped to this (Vocos's safeguard).
const MAX_MAGNITUDE: f64 = 100.0;

pub struct IstftHead {
    out: Linear,
    shape: HeadShape,
}

impl IstftHead {
    pub fn load(weights: &Weights, prefix: &str, shape: HeadShape) -> Result<Self> {
        Ok(Self { out: Linear::load(weights, &format!("{prefix}.out"), shape.dim, shape.n_fft + 2, true)?, shape })
    }

    /// The samples of `x (frames, dim)`.
    pub fn forward(&self, x: &Tensor) -> Result<Vec<f32>> {
        let (n_fft, hop) = (self.shape.n_fft, self.shape.hop);
        let bins = n_fft / 2 + 1;
        let predicted = self.out.forward(x)?.to_vec2::<f32>()?;
        let frames = predicted.len();
        if frames == 0 {
            bail!("no frames to turn into audio");
        }
        let window = hann(n_fft);
        let inverse = RealFftPlanner::<f64>::new().plan_fft_inverse(n_fft);
        let (mut spectrum, mut frame) = (inverse.make_input_vec(), inverse.make_output_vec());
        let length = n_fft + hop * (frames - 1);
        let (mut summed, mut envelope) = (vec![0f64; length], vec![0f64; length]);
        for (t, row) in predicted.iter().enumerate() {
            for (bin, value) in spectrum.iter_mut().enumerate() {
                let magnitude = (row[bin] as f64).exp().min(MAX_MAGNITUDE);
                let phase = row[bins + bin] as f64;
                *value = Complex::new(magnitude * phase.cos(), magnitude * phase.sin());
            }
            // A real signal's spectrum has no imaginary part at 0 and at n/2.
            spectrum[0].im = 0.0;
            spectrum[bins - 1].im = 0.0;
            inverse.process(&mut spectrum, &mut frame)?;
            let start = t * hop;
            for (i, (&sample, &w)) in frame.iter().zip(&window).enumerate() {
                summed[start + i] += sample / n_fft as f64 * w;
                envelope[start + i] += w * w;
            }
        }
        let (from, to) = match self.shape.padding {
            Padding::Center => (n_fft / 2, length - n_fft / 2),
            Padding::Same => ((n_fft - hop) / 2, length - (n_fft - hop) / 2),
        };
        if envelope[from..to].iter().any(|&e| e <= 1e-11) {
            bail!("the windows of a {n_fft}-point inverse STFT every {hop} samples leave gaps");
        }
        Ok(summed[from..to].iter().zip(&envelope[from..to]).map(|(&s, &e)| (s / e) as f32).collect())
    }
}
