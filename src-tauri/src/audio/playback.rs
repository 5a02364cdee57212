//! Playing audio on this machine's default output device (rodio). Where
//! there is none (a server, a container), playback is unavailable with a
//! clear error and nothing else is affected.

use super::Audio;
use anyhow::{anyhow, Result};
use rodio::buffer::SamplesBuffer;
use rodio::{DeviceSinkBuilder, MixerDeviceSink, Player};
use std::num::NonZero;

/// Plays `audio` and returns when it has finished.
pub fn play(audio: &Audio) -> Result<()> {
    let mut live = LivePlayback::open(audio.sample_rate)?;
    live.push(&audio.samples);
    live.finish();
    Ok(())
}

/// Mono audio played as it arrives: each pushed piece is queued behind the
/// ones before it and starts as soon as they end, so speech can be heard
/// while the rest of it is made.
pub struct LivePlayback {
    // Kept open for as long as the player plays into it.
    _device: MixerDeviceSink,
    player: Player,
    rate: NonZero<u32>,
}

impl LivePlayback {
    /// Opens the default output device for mono audio at `sample_rate`.
    pub fn open(sample_rate: u32) -> Result<Self> {
        let rate = NonZero::new(sample_rate).ok_or_else(|| anyhow!("cannot play audio with a sample rate of 0"))?;
        let mut device = DeviceSinkBuilder::open_default_sink()
            .map_err(|e| anyhow!("playback is unavailable: this machine has no usable audio output device ({e})"))?;
        device.log_on_drop(false);
        let player = Player::connect_new(device.mixer());
        Ok(Self { _device: device, player, rate })
    }

    /// Queues `samples` after what is already playing.
    pub fn push(&mut self, samples: &[f32]) {
        if !samples.is_empty() {
            self.player.append(SamplesBuffer::new(NonZero::<u16>::MIN, self.rate, samples.to_vec()));
        }
    }

    /// Waits until everything queued has been played.
    pub fn finish(self) {
        self.player.sleep_until_end();
    }
}
