//! `cake tts`: speak a text or a multi-speaker script in the voices of WAV files.

use crate::audio::{wav, Audio};
use crate::speech::vibevoice::generate::{SpeechObserver, SpeechSettings};
use crate::speech::vibevoice::model::VibeVoice;
use crate::speech::vibevoice::noise::SeededNoise;
use crate::speech::vibevoice::processor::{as_script, build_prompt, parse_script};
use crate::speech::voice_prompt::{VoicePrompt, SAMPLE_RATE};
use anyhow::{bail, Context, Result};
use candle_core::{DType, Tensor};
use clap::Args;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::time::Instant;

#[derive(Args, Debug)]
pub struct TtsArgs {
    /// A VibeVoice model folder (with Qwen2.5's tokenizer.json added).
    #[arg(long)]
    pub model: String,
    /// A WAV file of a speaker's voice, one per speaker in order (repeatable).
    #[arg(long = "voice", required = true)]
    pub voices: Vec<PathBuf>,
    /// The text to speak (one speaker), or a script of `Speaker N: …` lines.
    #[arg(long, conflicts_with = "script")]
    pub text: Option<String>,
    /// A file holding the script.
    #[arg(long)]
    pub script: Option<PathBuf>,
    /// Where to write the speech (16-bit PCM WAV, 24 kHz).
    #[arg(long)]
    pub out: PathBuf,
    /// Classifier-free guidance scale.
    #[arg(long, default_value_t = 1.3)]
    pub cfg_scale: f64,
    /// Diffusion steps per frame.
    #[arg(long, default_value_t = 10)]
    pub steps: usize,
    /// Random seed (default: a fresh one).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Stop after this many seconds of audio.
    #[arg(long)]
    pub max_seconds: Option<f64>,
    /// Also play the speech on this machine's audio output.
    #[arg(long)]
    pub play: bool,
    /// Run the language model's layers over workers too.
    #[command(flatten)]
    pub cluster: super::ClusterArgs,
}

/// Prints progress to stderr about twice a second.
struct Progress {
    started: Instant,
    last: Instant,
    hop: usize,
}

impl SpeechObserver for Progress {
    fn on_frame(&mut self, frame: usize, _latent: &Tensor, _audio: &[f32]) -> ControlFlow<()> {
        if self.last.elapsed().as_millis() >= 500 {
            self.last = Instant::now();
            let seconds = (frame + 1) as f64 * self.hop as f64 / SAMPLE_RATE as f64;
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
    let lines = parse_script(&as_script(&script))?;
    let mut voices = Vec::new();
    for path in &args.voices {
        let prompt = VoicePrompt::load(path)?;
        if let Some(notice) = &prompt.notice {
            eprintln!("{notice}");
        }
        voices.push(prompt.samples);
    }
    let dir = crate::library::resolve_model(Some(&args.model))?;
    let started = Instant::now();
    let model = match args.cluster.settings()? {
        Some(cluster) => VibeVoice::load_over(&cluster, &dir, DType::F32, &mut super::progress_printer())?,
        None => VibeVoice::load(&dir, DType::F32)?,
    };
    eprintln!("loaded {} in {:.1} s", dir.display(), started.elapsed().as_secs_f64());
    let prompt = build_prompt(&model.tokenizer, model.tokens, &lines, &voices, model.hop())?;
    let settings = SpeechSettings { cfg_scale: args.cfg_scale, steps: args.steps, max_seconds: args.max_seconds };
    let seed = args.seed.unwrap_or_else(rand::random);
    let mut progress = Progress { started: Instant::now(), last: Instant::now(), hop: model.hop() };
    let output = model.generate(&prompt, &settings, &mut SeededNoise::new(seed), &mut progress)?;
    if output.audio.is_empty() {
        bail!("the model produced no speech (it ended after {} tokens)", output.tokens.len());
    }
    let audio = Audio { samples: output.audio, sample_rate: SAMPLE_RATE };
    wav::write(&args.out, &audio)?;
    eprintln!(
        "wrote {} ({:.2} s of audio, {} frames, {:?}) in {:.1} s",
        args.out.display(),
        audio.duration_s(),
        output.frames,
        output.end,
        progress.started.elapsed().as_secs_f64()
    );
    if args.play {
        // No audio device is not a failure: the file is there.
        if let Err(e) = crate::audio::playback::play(&audio) {
            eprintln!("{e:#}; the speech is in {}", args.out.display());
        }
    }
    Ok(())
}
