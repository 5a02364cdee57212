//! Audio in and out: WAV files of any common encoding read as mono float
//! samples, resampled to the rate a model needs, and speech written as
//! 16-bit PCM WAV.
//!
//! - [`wav`]: reading (with every check a hostile file needs) and writing.
//! - [`resample`]: band-limited sample-rate conversion.
//! - [`playback`]: playing audio on the default output device.
//! - [`splice`]: joining pieces of audio without a click.

pub mod playback;
pub mod resample;
pub mod splice;
pub mod wav;

/// Mono audio: samples in -1..1 and their rate.
#[derive(Debug, Clone, PartialEq)]
pub struct Audio {
    pub samples: Vec<f32>,
    pub sample_rate: u32,
}

impl Audio {
    /// Length in seconds.
    pub fn duration_s(&self) -> f64 {
        self.samples.len() as f64 / self.sample_rate.max(1) as f64
    }

    /// The same audio at `rate` (unchanged when it already is).
    pub fn resampled(&self, rate: u32) -> anyhow::Result<Audio> {
        if rate == self.sample_rate {
            return Ok(self.clone());
        }
        Ok(Audio { samples: resample::resample(&self.samples, self.sample_rate, rate)?, sample_rate: rate })
    }
}
