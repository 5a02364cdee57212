//! Joining pieces of audio made one after another without a click: the
//! first few milliseconds of each new piece ramp from the value the last
//! piece ended on, so the signal never jumps at a seam. The ramp changes
//! only the new piece's start, so audio already played stays as it was.

/// Samples in a seam's ramp: 10 ms at 24 kHz (5 ms at LuxTTS's 48 kHz).
pub const RAMP_SAMPLES: usize = 240;

/// The state of a run of pieces: where the audio so far ended, and how
/// much of the current piece's ramp is left.
#[derive(Debug, Clone, Default)]
pub struct Seams {
    /// The last sample so far (none before any audio).
    last: Option<f32>,
    /// Where the current piece's ramp starts from, and its samples left.
    ramp: Option<(f32, usize)>,
}

impl Seams {
    /// A new piece starts: its first samples will ramp from the last one so far.
    pub fn next_piece(&mut self) {
        self.ramp = self.last.map(|from| (from, RAMP_SAMPLES));
    }

    /// Smooths `samples` (the next run of the current piece) in place.
    pub fn apply(&mut self, samples: &mut [f32]) {
        for sample in samples.iter_mut() {
            let Some((from, left)) = self.ramp else { break };
            // Weight of the new signal: 1/(N+1) at the seam, rising to N/(N+1).
            let weight = (RAMP_SAMPLES - left + 1) as f32 / (RAMP_SAMPLES + 1) as f32;
            *sample = from * (1.0 - weight) + *sample * weight;
            self.ramp = (left > 1).then_some((from, left - 1));
        }
        if let Some(&end) = samples.last() {
            self.last = Some(end);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn largest_step(samples: &[f32]) -> f32 {
        samples.windows(2).map(|w| (w[1] - w[0]).abs()).fold(0.0, f32::max)
    }

    #[test]
    fn a_seam_between_pieces_has_no_step() {
        // A piece ending at +0.8 and one starting at −0.8: a click if joined raw.
        let first: Vec<f32> = (0..1000).map(|i| 0.8 * (i as f32 / 999.0)).collect();
        let second: Vec<f32> = (0..1000).map(|i| -0.8 + 0.001 * i as f32).collect();
        let mut seams = Seams::default();
        let mut joined = Vec::new();
        for piece in [&first, &second] {
            seams.next_piece();
            // Delivered in uneven runs, as frames arrive.
            for run in piece.chunks(97) {
                let mut run = run.to_vec();
                seams.apply(&mut run);
                joined.extend(run);
            }
        }
        assert_eq!(joined[..1000], first[..], "the first piece is unchanged");
        assert_eq!(joined[1000 + RAMP_SAMPLES..], second[RAMP_SAMPLES..], "past the ramp, the second is too");
        let raw_step = (second[0] - first[999]).abs();
        let step = largest_step(&joined);
        assert!(step < raw_step / 100.0, "largest step {step} against a raw seam of {raw_step}");
    }
}
