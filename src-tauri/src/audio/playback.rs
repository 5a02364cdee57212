//! Playing audio on this machine's default output device (rodio). Where
//! there is none (a server, a container), playback is unavailable with a
//! clear error and nothing else is affected.

use super::Audio;
use anyhow::{anyhow, Result};
use rodio::buffer::SamplesBuffer;
use rodio::{DeviceSinkBuilder, Player};
use std::num::NonZero;

/// Plays `audio` and returns when it has finished.
pub fn play(audio: &Audio) -> Result<()> {
    let rate = NonZero::new(audio.sample_rate).ok_or_else(|| anyhow!("cannot play audio with a sample rate of 0"))?;
    let mut device = DeviceSinkBuilder::open_default_sink()
        .map_err(|e| anyhow!("playback is unavailable: this machine has no usable audio output device ({e})"))?;
    device.log_on_drop(false);
    let player = Player::connect_new(device.mixer());
    player.append(SamplesBuffer::new(NonZero::<u16>::MIN, rate, audio.samples.clone()));
    player.sleep_until_end();
    Ok(())
}
