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
/// while the rest of it is made. When the queue runs dry, audio is held
/// back for a [`Refill`].
pub struct LivePlayback {
    // Kept open for as long as the player plays into it.
    _device: MixerDeviceSink,
    player: Player,
    rate: NonZero<u32>,
    refill: Refill,
    started: bool,
}

/// How much audio to hold back when live playback has run dry (speech made
/// slower than it plays): half a second the first time, twice as much at
/// each later time, at most four seconds. A slow machine then pauses a few
/// times, each pause longer, instead of after every frame.
struct Refill {
    held: Vec<f32>,
    /// Samples to hold the next time the queue runs dry.
    wanted: usize,
    most: usize,
}

impl Refill {
    fn new(sample_rate: u32) -> Self {
        let rate = sample_rate as usize;
        Self { held: Vec::new(), wanted: rate / 2, most: 4 * rate }
    }

    /// What may be queued now of `samples`, given whether the queue ran dry:
    /// everything held so far once a refill is complete, else nothing.
    fn take(&mut self, samples: &[f32], ran_dry: bool) -> Option<Vec<f32>> {
        if !ran_dry && self.held.is_empty() {
            return Some(samples.to_vec());
        }
        self.held.extend_from_slice(samples);
        if self.held.len() < self.wanted {
            return None;
        }
        self.wanted = (self.wanted * 2).min(self.most);
        Some(std::mem::take(&mut self.held))
    }

    /// Whatever is held (nothing more comes).
    fn rest(&mut self) -> Vec<f32> {
        std::mem::take(&mut self.held)
    }
}

impl LivePlayback {
    /// Opens the default output device for mono audio at `sample_rate`.
    pub fn open(sample_rate: u32) -> Result<Self> {
        let rate = NonZero::new(sample_rate).ok_or_else(|| anyhow!("cannot play audio with a sample rate of 0"))?;
        let mut device = DeviceSinkBuilder::open_default_sink()
            .map_err(|e| anyhow!("playback is unavailable: this machine has no usable audio output device ({e})"))?;
        device.log_on_drop(false);
        let player = Player::connect_new(device.mixer());
        Ok(Self { _device: device, player, rate, refill: Refill::new(sample_rate), started: false })
    }

    /// Queues `samples` after what is already playing (or holds them back
    /// while a refill comes in).
    pub fn push(&mut self, samples: &[f32]) {
        if samples.is_empty() {
            return;
        }
        let ran_dry = self.started && self.player.empty();
        if let Some(ready) = self.refill.take(samples, ran_dry) {
            self.queue(ready);
        }
    }

    fn queue(&mut self, samples: Vec<f32>) {
        if !samples.is_empty() {
            self.player.append(SamplesBuffer::new(NonZero::<u16>::MIN, self.rate, samples));
            self.started = true;
        }
    }

    /// Plays what is held and waits until everything queued has been played.
    pub fn finish(mut self) {
        let rest = self.refill.rest();
        self.queue(rest);
        self.player.sleep_until_end();
    }
}

#[cfg(test)]
mod tests {
    use super::Refill;

    #[test]
    fn a_dry_queue_waits_for_a_refill_that_doubles_each_time() {
        let mut refill = Refill::new(10);
        assert_eq!(refill.take(&[1.0; 3], false), Some(vec![1.0; 3]), "flowing audio passes straight on");
        assert_eq!(refill.take(&[2.0; 3], true), None, "dry: hold half a second (5 samples)");
        assert_eq!(refill.take(&[3.0; 2], false), Some(vec![2.0, 2.0, 2.0, 3.0, 3.0]));
        assert_eq!(refill.take(&[4.0; 1], false), Some(vec![4.0]));
        for _ in 0..9 {
            assert_eq!(refill.take(&[5.0; 1], true), None, "then a whole second (10 samples)");
        }
        assert_eq!(refill.take(&[5.0; 1], true).map(|s| s.len()), Some(10));
        assert_eq!(refill.take(&[6.0; 7], true), None);
        assert_eq!(refill.rest(), vec![6.0; 7], "what is held still plays at the end");
        for _ in 0..5 {
            refill.take(&[0.0; 40], true);
        }
        assert_eq!(refill.wanted, 40, "at most four seconds");
    }
}
