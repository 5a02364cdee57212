//! VibeVoice end to end against Microsoft's package on the tiny random
//! checkpoint: the prompt built from the script and the voice WAVs, then
//! generation fed the reference run's recorded noise, compared at every
//! step (logits, latents, audio frames) and on the final waveform; on one
//! machine, and with the language model's layers on two worker processes.

mod common;

use cake::audio::wav;
use cake::cluster::cluster_key::ClusterKey;
use cake::cluster::discovery::MdnsScope;
use cake::cluster::master::ClusterSettings;
use cake::formats::safetensors::SafetensorsFile;
use cake::speech::noise::NoiseTape;
use cake::speech::vibevoice::generate::{SpeechEnd, SpeechObserver, SpeechSettings};
use cake::speech::vibevoice::model::VibeVoice;
use cake::speech::vibevoice::processor::{build_prompt, parse_script};
use candle_core::{DType, Device, Tensor};
use common::worker::Worker;
use serde_json::Value;
use std::ops::ControlFlow;
use std::time::Duration;

struct Checker {
    reference: SafetensorsFile,
    forced: Vec<u32>,
    unforced: Vec<u32>,
    worst: f32,
}

impl Checker {
    fn get(&self, name: &str) -> Tensor {
        self.reference.load(name, &Device::Cpu).unwrap_or_else(|e| panic!("{name}: {e:#}"))
    }

    fn check(&mut self, what: &str, got: &Tensor, name: &str) {
        let want = self.get(name);
        self.check_against(what, got, &want);
    }

    fn check_against(&mut self, what: &str, got: &Tensor, want: &Tensor) {
        let error = common::relative_error(got, want);
        assert!(error <= 1e-4, "{what}: relative error {error:e}");
        self.worst = self.worst.max(error);
    }
}

impl SpeechObserver for Checker {
    fn choose(&mut self, step: usize, logits: &Tensor, greedy: u32) -> u32 {
        self.check(&format!("step {step} logits"), logits, &format!("step{step}.logits"));
        assert_eq!(greedy, self.unforced[step], "step {step}: the greedy choice");
        // The random model never ends speech by itself: take the reference's script.
        self.forced[step]
    }

    fn on_frame(&mut self, frame: usize, latent: &Tensor, audio: &[f32]) -> ControlFlow<()> {
        self.check(&format!("frame {frame} latent"), latent, &format!("frame{frame}.latent"));
        let audio = Tensor::new(audio, &Device::Cpu).unwrap();
        self.check(&format!("frame {frame} audio"), &audio, &format!("frame{frame}.acoustic_decoder.out"));
        ControlFlow::Continue(())
    }
}

/// Speaks the reference run's script with `model` (the tiny checkpoint)
/// fed the recorded noise, checking every step against the reference.
fn speak_like_the_reference(model: &VibeVoice) {
    let dir = common::fixture("tiny/vibevoice");
    let meta: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("reference.json")).unwrap()).unwrap();
    let ids =
        |key: &str| -> Vec<u32> { meta[key].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as u32).collect() };

    let voices: Vec<Vec<f32>> =
        ["voice0.wav", "voice1.wav"].iter().map(|f| wav::read(&dir.join(f), 60.0).unwrap().audio.samples).collect();
    let lines = parse_script(meta["script"].as_str().unwrap()).unwrap();
    let prompt = build_prompt(&model.tokenizer, model.tokens, &lines, &voices, model.hop()).unwrap();
    assert_eq!(prompt.input_ids, ids("input_ids"));
    let positions: Vec<usize> =
        meta["speech_input_positions"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as usize).collect();
    assert_eq!(prompt.speech_positions, positions);

    let reference = SafetensorsFile::open(&dir.join("reference.safetensors")).unwrap();
    let tape: Vec<Tensor> = (0..meta["noise_tape"].as_array().unwrap().len())
        .map(|i| reference.load(&format!("tape.{i}"), &Device::Cpu).unwrap())
        .collect();
    let mut checker =
        Checker { reference, forced: ids("token_script_ids"), unforced: ids("unforced_argmax"), worst: 0.0 };
    // The normalised voices are the reference's speech tensors (before padding).
    for (k, voice) in prompt.voices.iter().enumerate() {
        let row = checker.get("proc.speech_tensors").get(k).unwrap().narrow(0, 0, voice.len()).unwrap();
        checker.check_against(&format!("voice {k}"), &Tensor::new(voice.as_slice(), &Device::Cpu).unwrap(), &row);
    }
    let settings = SpeechSettings {
        cfg_scale: meta["cfg_scale"].as_f64().unwrap(),
        steps: meta["diffusion_steps"].as_u64().unwrap() as usize,
        max_seconds: None,
    };
    let output = model.generate(&prompt, &settings, &mut NoiseTape::new(tape), &mut checker).unwrap();
    assert_eq!(output.tokens, ids("generated"));
    assert_eq!(output.end, SpeechEnd::EndOfText);
    assert_eq!(output.frames, meta["n_frames"].as_u64().unwrap() as usize);
    let waveform = Tensor::new(output.audio.as_slice(), &Device::Cpu).unwrap();
    checker.check("final waveform", &waveform, "final.waveform");
    eprintln!("worst relative error over all checks: {:e}", checker.worst);
}

#[test]
fn speech_matches_the_reference_package_step_by_step() {
    speak_like_the_reference(&VibeVoice::load(&common::fixture("tiny/vibevoice"), DType::F32).unwrap());
}

#[test]
fn the_language_model_split_with_a_worker_process_still_matches_the_reference() {
    const KEY: &str = "speech cluster key";
    let dir = common::fixture("tiny/vibevoice");
    assert_eq!(common::layer_count(&dir), 2);
    // The master keeps the speech parts, embedding, head and the first layer
    // (it always does); the worker fits the second.
    let f32 = Some(DType::F32);
    let a = Worker::start(KEY, "speech-a", Some(common::share(&dir, f32, 1..2, false)));
    let scope = MdnsScope { interfaces: vec!["lo".into()] };
    let mut cluster = ClusterSettings::new(ClusterKey::from_passphrase(KEY).unwrap(), scope, Duration::ZERO);
    cluster.workers = vec![a.address.clone()];
    cluster.master_memory = Some(common::share(&dir, f32, 0..1, true));
    let mut progress = Vec::new();
    let model =
        VibeVoice::load_over(&cluster, &dir, DType::F32, &mut |_, message| progress.push(message.to_string())).unwrap();
    let stages: Vec<_> =
        model.language_model.remote_stages.iter().map(|s| (s.worker.name().to_string(), s.layers.clone())).collect();
    assert_eq!(stages, [("speech-a".to_string(), 1..2)]);
    assert!(progress.iter().any(|m| m.starts_with("sending speech-a the weights of layers 1–1")), "{progress:?}");
    speak_like_the_reference(&model);
    let timings = model.language_model.remote_stages[0].worker.timings();
    assert!(timings.bytes_sent > 0 && timings.bytes_received > 0, "the worker took part");
}

#[test]
fn cake_tts_reads_voices_and_reports_problems_clearly() {
    let dir = common::fixture("tiny/vibevoice");
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("speech.wav");
    let voice0 = dir.join("voice0.wav");
    let voice1 = dir.join("voice1.wav");
    let (m, v0, v1, o) =
        (dir.to_str().unwrap(), voice0.to_str().unwrap(), voice1.to_str().unwrap(), out.to_str().unwrap());

    // The random model ends at once (its greedy choice is the end of text): said plainly.
    let err = common::cake_error(&[
        "tts",
        "--model",
        m,
        "--voice",
        v0,
        "--voice",
        v1,
        "--text",
        "Speaker 1: Hi.\nSpeaker 2: Hello.",
        "--out",
        o,
        "--seed",
        "3",
    ]);
    assert!(err.contains("produced no speech"), "{err}");
    assert!(!out.exists(), "no file is written when there is no speech");

    let err = common::cake_error(&[
        "tts",
        "--model",
        m,
        "--voice",
        v0,
        "--text",
        "Speaker 1: Hi.\nSpeaker 2: Hello.",
        "--out",
        o,
    ]);
    assert!(err.contains("2 speakers but 1 voice"), "{err}");

    let not_wav = tmp.path().join("voice.wav");
    std::fs::write(&not_wav, b"definitely not audio").unwrap();
    let err =
        common::cake_error(&["tts", "--model", m, "--voice", not_wav.to_str().unwrap(), "--text", "Hi.", "--out", o]);
    assert!(err.contains("voice.wav") && err.contains("not a valid WAV file"), "{err}");

    // A checkpoint without its tokenizer says which file to add.
    let bare = tmp.path().join("bare");
    std::fs::create_dir(&bare).unwrap();
    for file in ["config.json", "model.safetensors"] {
        std::fs::copy(dir.join(file), bare.join(file)).unwrap();
    }
    let err =
        common::cake_error(&["tts", "--model", bare.to_str().unwrap(), "--voice", v0, "--text", "Hi.", "--out", o]);
    assert!(err.contains("tokenizer.json") && err.contains("Qwen2.5"), "{err}");
}
