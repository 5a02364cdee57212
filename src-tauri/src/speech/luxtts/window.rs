//! The periodic Hann window, shared by the prompt's spectrogram and the
//! vocoder's inverse STFTs.

/// `0.5 − 0.5·cos(2πi/n)` for `i` in `0..n` (torch's `hann_window(n)`).
pub fn hann(n: usize) -> Vec<f64> {
    (0..n).map(|i| 0.5 - 0.5 * (2.0 * std::f64::consts::PI * i as f64 / n as f64).cos()).collect()
}
