//! `cake tts`: speak a text or a multi-speaker script in the voices of WAV
//! files (VibeVoice-1.5B), a text in the voice of a preset
//! (VibeVoice-Realtime-0.5B), or a text in the voice of a WAV file and its
//! transcript (LuxTTS); with `--play`, heard while it is made.

use crate::audio::playback::LivePlayback;
use crate::audio::{wav, Audio};
use crate::speech::family::VoiceKind;
use crate::speech::model::{SpeechModel, Voices};
use crate::speech::noise::SeededNoise;
use crate::speech::vibevoice::generate::{SpeechObserver, SpeechSettings};
use crate::speech::voice_prompt::VoicePrompt;
use anyhow::{bail, Context, Result};
use candle_core::Tensor;
use clap::Args;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(Args, Debug)]
pub struct TtsArgs {
    /// A speech model folder: VibeVoice (with Qwen2.5's tokenizer.json
    /// added), VibeVoice-Realtime or LuxTTS.
    #[arg(long)]
    pub model: String,
    /// A WAV file of a speaker's voice, one per speaker in order
    /// (repeatable); for VibeVoice-Realtime, one voice preset (.pt or
    /// .safetensors); for LuxTTS, one WAV file with --transcript.
    #[arg(long = "voice", required = true)]
    pub voices: Vec<PathBuf>,
    /// (LuxTTS) What the --voice WAV file says.
    #[arg(long)]
    pub transcript: Option<String>,
    /// The text to speak (one speaker), or a script of `Speaker N: …` lines.
    #[arg(long, conflicts_with = "script")]
    pub text: Option<String>,
    /// A file holding the script.
    #[arg(long)]
    pub script: Option<PathBuf>,
    /// Where to write the speech (16-bit PCM WAV; 24 kHz, LuxTTS 48 kHz).
    #[arg(long)]
    pub out: PathBuf,
    /// Classifier-free guidance scale (default: 1.3, Realtime 1.5, LuxTTS 3).
    #[arg(long)]
    pub cfg_scale: Option<f64>,
    /// Diffusion steps per frame (default: 10, Realtime 5), or LuxTTS's
    /// flow steps (default: 4).
    #[arg(long)]
    pub steps: Option<usize>,
    /// Random seed (default: a fresh one).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Stop after this many seconds of audio.
    #[arg(long)]
    pub max_seconds: Option<f64>,
    /// Also play the speech on this machine's audio output, each frame as
    /// soon as it is made.
    #[arg(long)]
    pub play: bool,
    /// Run the language model's layers over workers too.
    #[command(flatten)]
    pub cluster: super::ClusterArgs,
}

/// Prints progress to stderr about twice a second and, with `--play`,
/// plays each frame as it comes.
struct Progress {
    started: Instant,
    last: Instant,
    sample_rate: u32,
    /// Samples of audio so far.
    samples: usize,
    live: Option<LivePlayback>,
}

impl Progress {
    fn new(sample_rate: u32, play: bool) -> Self {
        let live = if play {
            // No audio device is not a failure: the file is still written.
            LivePlayback::open(sample_rate).map_err(|e| eprintln!("{e:#}; the speech will only be written")).ok()
        } else {
            None
        };
        Self { started: Instant::now(), last: Instant::now(), sample_rate, samples: 0, live }
    }
}

impl SpeechObserver for Progress {
    fn on_piece(&mut self, piece: usize, pieces: usize) {
        if pieces > 1 {
            eprintln!("piece {} of {pieces}", piece + 1);
        }
    }

    fn on_frame(&mut self, frame: usize, _latent: &Tensor, audio: &[f32]) -> ControlFlow<()> {
        if let Some(live) = &mut self.live {
            if frame == 0 {
                eprintln!("playing from {:.2} s after the model was ready", self.started.elapsed().as_secs_f64());
            }
            live.push(audio);
        }
        self.samples += audio.len();
        if self.last.elapsed().as_millis() >= 500 {
            self.last = Instant::now();
            let seconds = self.samples as f64 / self.sample_rate as f64;
            eprintln!(
                "frame {}: {seconds:.1} s of audio after {:.1} s",
                frame + 1,
                self.started.elapsed().as_secs_f64()
            );
        }
        ControlFlow::Continue(())
    }
}

pub fn run(args: TtsArgs) -> Result<()> {
    let script = match (&args.text, &args.script) {
        (Some(text), None) => text.clone(),
        (None, Some(path)) => {
            std::fs::read_to_string(path).with_context(|| format!("{}: cannot read the script", path.display()))?
        }
        _ => bail!("give the words to speak with --text or --script"),
    };
    let dir = crate::library::resolve_model(Some(&args.model))?;
    let seed = args.seed.unwrap_or_else(rand::random);
    let started = Instant::now();
    let cluster = args.cluster.settings()?;
    let model = SpeechModel::load(&dir, cluster.as_ref(), &mut super::progress_printer())?;
    eprintln!("loaded {} in {:.1} s", dir.display(), started.elapsed().as_secs_f64());
    let family = model.family();
    if args.transcript.is_some() && family.voice_kind() != VoiceKind::TranscribedPrompt {
        bail!("--transcript is for LuxTTS; {} does not read one", family.name());
    }
    let voices = match family.voice_kind() {
        VoiceKind::Prompt => Voices::Prompts(args.voices.iter().map(|path| voice_prompt(path)).collect::<Result<_>>()?),
        VoiceKind::Preset => match args.voices.as_slice() {
            [preset] => Voices::Preset(preset.clone()),
            _ => bail!("VibeVoice-Realtime speaks in one voice: give one --voice preset (.pt or .safetensors)"),
        },
        VoiceKind::TranscribedPrompt => match (args.voices.as_slice(), &args.transcript) {
            ([wav], Some(transcript)) => {
                Voices::Transcribed { samples: voice_prompt(wav)?, transcript: transcript.clone() }
            }
            _ => bail!("LuxTTS speaks in one voice: give one --voice WAV file and --transcript with what it says"),
        },
    };
    let defaults = family.default_settings();
    let settings = SpeechSettings {
        cfg_scale: args.cfg_scale.unwrap_or(defaults.cfg_scale),
        steps: args.steps.unwrap_or(defaults.steps),
        max_seconds: args.max_seconds,
    };
    let mut progress = Progress::new(model.sample_rate(), args.play);
    let output = model.speak(&script, &voices, &settings, &mut SeededNoise::new(seed), &mut progress)?;
    if output.audio.is_empty() {
        bail!("the model produced no speech (it ended after {} tokens)", output.tokens.len());
    }
    let audio = Audio { samples: output.audio, sample_rate: model.sample_rate() };
    wav::write(&args.out, &audio)?;
    eprintln!(
        "wrote {} ({:.2} s of audio, {} frames, {:?}) in {:.1} s",
        args.out.display(),
        audio.duration_s(),
        output.frames,
        output.end,
        progress.started.elapsed().as_secs_f64()
    );
    if let Some(live) = progress.live.take() {
        live.finish();
    }
    Ok(())
}

/// A speaker's WAV voice prompt, its notice (if it was cut) printed.
fn voice_prompt(path: &Path) -> Result<Vec<f32>> {
    let prompt = VoicePrompt::load(path)?;
    if let Some(notice) = &prompt.notice {
        eprintln!("{notice}");
    }
    Ok(prompt.samples)
}
