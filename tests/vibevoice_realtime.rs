//! VibeVoice-Realtime-0.5B against Microsoft's streaming code
//! (github.com/microsoft/VibeVoice at e73d1e17) on the tiny random
//! checkpoint of tests/fixtures/generate_tiny_vibevoice_realtime.py: the
//! text's tokens, every frame's conditions and latent, the probability that
//! speech is over after every frame, and the waveform, with the reference
//! run's recorded noise; the components on fixed inputs; the loader on the
//! released layout's full tensor list; and presets that do not fit.

mod common;

use cake::formats::safetensors::SafetensorsFile;
use cake::models::weights::WeightStore;
use cake::speech::noise::NoiseTape;
use cake::speech::vibevoice::config::{RealtimeConfig, Variant};
use cake::speech::vibevoice::generate::{SpeechEnd, SpeechObserver, SpeechSettings};
use cake::speech::vibevoice::realtime::VibeVoiceRealtime;
use cake::speech::vibevoice::speech_tokenizer::StreamState;
use cake::speech::vibevoice::voice_preset::VoicePreset;
use cake::text::tokenizer::TextTokenizer;
use candle_core::{DType, Device, Tensor};
use common::shape_only::ShapeOnly;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::ops::ControlFlow;
use std::path::Path;
use std::sync::Arc;

fn fixture() -> std::path::PathBuf {
    common::fixture("tiny/vibevoice_realtime")
}

fn meta() -> Value {
    serde_json::from_str(&std::fs::read_to_string(fixture().join("reference.json")).unwrap()).unwrap()
}

fn load_model() -> VibeVoiceRealtime {
    VibeVoiceRealtime::load(&fixture(), DType::F32).unwrap()
}

/// Checks every frame as the model makes it.
struct Checker {
    reference: SafetensorsFile,
    end_probabilities: Vec<f32>,
    worst: f32,
}

impl Checker {
    fn check(&mut self, what: &str, got: &Tensor, name: &str) {
        let want = self.reference.load(name, &Device::Cpu).unwrap_or_else(|e| panic!("{name}: {e:#}"));
        let error = common::relative_error(got, &want);
        assert!(error <= 1e-4, "{what}: relative error {error:e}");
        self.worst = self.worst.max(error);
    }
}

impl SpeechObserver for Checker {
    fn on_conditions(&mut self, frame: usize, conditions: &Tensor) {
        self.check(&format!("frame {frame} conditions"), conditions, &format!("frame{frame}.conditions"));
    }

    fn on_frame(&mut self, frame: usize, latent: &Tensor, _audio: &[f32]) -> ControlFlow<()> {
        self.check(&format!("frame {frame} latent"), latent, &format!("frame{frame}.latent"));
        ControlFlow::Continue(())
    }

    fn on_end_probability(&mut self, _frame: usize, probability: f32) {
        self.end_probabilities.push(probability);
    }
}

#[test]
fn the_folder_is_recognised_as_realtime() {
    let text = std::fs::read_to_string(fixture().join("config.json")).unwrap();
    assert_eq!(Variant::of_config(&text), Some(Variant::Realtime));
    let standard = std::fs::read_to_string(common::fixture("tiny/vibevoice/config.json")).unwrap();
    assert_eq!(Variant::of_config(&standard), Some(Variant::Standard));
    assert_eq!(Variant::of_config(r#"{"model_type": "llama"}"#), None);
    // As a text model it is refused with where it can speak.
    let err = common::cake_error(&["run", "--model", fixture().to_str().unwrap(), "--prompt", "hi"]);
    assert!(err.contains("VibeVoice-Realtime speech model") && err.contains("cake tts"), "{err}");
}

#[test]
fn speech_matches_the_reference_frame_by_frame() {
    let (model, meta) = (load_model(), meta());
    let ids: Vec<u32> = meta["text_ids"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as u32).collect();
    assert_eq!(model.text_tokens(meta["text"].as_str().unwrap()).unwrap(), ids);
    let preset = VoicePreset::load(&fixture().join("voice.safetensors"), &model.preset_shape()).unwrap();
    let reference = SafetensorsFile::open(&fixture().join("reference.safetensors")).unwrap();
    let tape: Vec<Tensor> = (0..meta["noise_draws"].as_u64().unwrap())
        .map(|i| reference.load(&format!("noise{i}"), &Device::Cpu).unwrap())
        .collect();
    let want_end = reference.load("eos_probabilities", &Device::Cpu).unwrap().to_vec1::<f32>().unwrap();
    let mut checker = Checker { reference, end_probabilities: Vec::new(), worst: 0.0 };
    let settings = SpeechSettings {
        cfg_scale: meta["cfg_scale"].as_f64().unwrap(),
        steps: meta["diffusion_steps"].as_u64().unwrap() as usize,
        max_seconds: None,
    };
    let text = meta["text"].as_str().unwrap();
    let output = model.generate(text, &preset, &settings, &mut NoiseTape::new(tape), &mut checker).unwrap();
    assert_eq!(output.end, SpeechEnd::EndOfText);
    assert_eq!(output.frames, meta["frames"].as_u64().unwrap() as usize);
    // The reference finishes the window after the end (its audio dropped); Cake stops.
    assert_eq!(checker.end_probabilities.len(), output.frames);
    for (frame, (got, want)) in checker.end_probabilities.iter().zip(&want_end).enumerate() {
        assert!((got - want).abs() <= 1e-5, "frame {frame}: end probability {got} against {want}");
    }
    assert!(*checker.end_probabilities.last().unwrap() > 0.5);
    assert!(checker.end_probabilities[..output.frames - 1].iter().all(|&p| p <= 0.5));
    let waveform = Tensor::new(output.audio.as_slice(), &Device::Cpu).unwrap();
    checker.check("waveform", &waveform, "audio");
    eprintln!("worst relative error over all checks: {:e}", checker.worst);
}

/// The acoustic decoder, streaming the reference's own latents, gives its
/// audio frame by frame (the whole run compounds the small differences of
/// every step; this isolates the decoder's).
#[test]
fn the_decoder_streams_the_reference_latents_into_its_audio() {
    let (model, meta) = (load_model(), meta());
    let reference = SafetensorsFile::open(&fixture().join("reference.safetensors")).unwrap();
    let audio = reference.load("audio", &Device::Cpu).unwrap();
    let hop = model.hop();
    let mut stream = StreamState::default();
    for frame in 0..meta["frames"].as_u64().unwrap() as usize {
        let latent = reference.load(&format!("frame{frame}.latent"), &Device::Cpu).unwrap().unsqueeze(0).unwrap();
        let raw = model.to_decoder_input(&latent).unwrap();
        let chunk = model.acoustic_decoder.decode_stream(&raw, &mut stream).unwrap();
        let error = common::relative_error(&chunk, &audio.narrow(0, frame * hop, hop).unwrap());
        assert!(error <= 1e-5, "frame {frame}: relative error {error:e}");
    }
}

#[test]
fn the_connector_and_the_end_classifier_match_the_reference() {
    let model = load_model();
    let reference = SafetensorsFile::open(&fixture().join("reference.safetensors")).unwrap();
    let get = |name: &str| reference.load(name, &Device::Cpu).unwrap();
    let connected = model.acoustic_connector.forward(&get("connector.input")).unwrap();
    assert!(common::relative_error(&connected, &get("connector.output")) <= 1e-5);
    let got = model.end_probability(&get("eos_classifier.input")).unwrap().to_vec1::<f32>().unwrap();
    let want = get("eos_classifier.probability").to_vec1::<f32>().unwrap();
    for (g, w) in got.iter().zip(&want) {
        assert!((g - w).abs() <= 1e-5, "{g} against {w}");
    }
}

fn released_layout() -> (RealtimeConfig, BTreeMap<String, Vec<usize>>) {
    let dir = common::fixture("vibevoice_realtime_0_5b");
    let shapes = serde_json::from_str(&std::fs::read_to_string(dir.join("state_dict.json")).unwrap()).unwrap();
    (RealtimeConfig::from_dir(&dir).unwrap(), shapes)
}

fn load_shapes(config: RealtimeConfig, shapes: BTreeMap<String, Vec<usize>>) -> anyhow::Result<ShapeOnly> {
    let store = ShapeOnly { shapes: Arc::new(shapes), loaded: Arc::default() };
    let tokenizer = TextTokenizer::from_folder(&fixture()).unwrap();
    let open = || -> anyhow::Result<Box<dyn WeightStore>> { Ok(Box::new(store.clone())) };
    VibeVoiceRealtime::load_from(config, tokenizer, &open, DType::F32)?;
    Ok(store)
}

/// Every tensor the loader reads is in the released layout with its shape;
/// what it leaves is the acoustic encoder (the model only decodes audio) and
/// the upper stack's token embedding (it reads hidden states, never tokens).
#[test]
fn the_loader_reads_the_released_layout_and_only_leaves_what_is_never_used() {
    let (config, reference) = released_layout();
    assert_eq!((config.text_layers(), config.speech_layers), (4, 20));
    assert_eq!(config.acoustic.hop(), 3200);
    let store = load_shapes(config, reference.clone()).unwrap();
    let loaded = store.loaded.lock().unwrap().clone();
    for (name, shape) in &loaded {
        assert_eq!(reference.get(name), Some(shape), "{name}");
    }
    let left: Vec<&String> = reference.keys().filter(|k| !loaded.contains_key(*k)).collect();
    let unused = |k: &str| {
        k.starts_with("model.acoustic_tokenizer.encoder.") || k == "model.tts_language_model.embed_tokens.weight"
    };
    let used_but_left: Vec<&&String> = left.iter().filter(|k| !unused(k)).collect();
    assert!(used_but_left.is_empty(), "tensors the loader never reads: {used_but_left:?}");
    assert!(left.len() > 100, "the encoder's tensors are left ({} left)", left.len());
}

#[test]
fn a_folder_missing_or_misshaping_a_tensor_is_refused_by_name() {
    let (config, reference) = released_layout();
    let name = "model.tts_language_model.layers.7.mlp.down_proj.weight";
    let mut missing = reference.clone();
    missing.remove(name);
    let error = format!("{:#}", load_shapes(config.clone(), missing).err().expect("a missing tensor is refused"));
    assert!(error.contains(name), "{error}");
    let mut misshapen = reference;
    misshapen.insert("tts_eos_classifier.fc1.weight".into(), vec![896, 895]);
    let error = format!("{:#}", load_shapes(config, misshapen).err().expect("a misshapen tensor is refused"));
    assert!(error.contains("tts_eos_classifier.fc1.weight"), "{error}");
}

/// Writes the fixture's preset with `change` applied to its tensors.
fn changed_preset(dir: &Path, change: impl FnOnce(&mut HashMap<String, Tensor>)) -> std::path::PathBuf {
    let file = SafetensorsFile::open(&fixture().join("voice.safetensors")).unwrap();
    let mut tensors: HashMap<String, Tensor> =
        file.header.tensors.keys().map(|n| (n.clone(), file.load(n, &Device::Cpu).unwrap())).collect();
    change(&mut tensors);
    let path = dir.join("voice.safetensors");
    candle_core::safetensors::save(&tensors, &path).unwrap();
    path
}

#[test]
fn presets_that_do_not_fit_the_model_are_refused_with_the_tensor_named() {
    let model = load_model();
    let dir = tempfile::tempdir().unwrap();
    let shape = model.preset_shape();
    let path = changed_preset(dir.path(), |t| {
        t.remove("tts_lm.layers.1.value");
    });
    let error = format!("{:#}", VoicePreset::load(&path, &shape).err().unwrap());
    assert!(error.contains("voice.safetensors") && error.contains("`tts_lm.layers.1.value` is missing"), "{error}");
    let path = changed_preset(dir.path(), |t| {
        let key = t["neg_tts_lm.layers.0.key"].narrow(3, 0, 4).unwrap();
        t.insert("neg_tts_lm.layers.0.key".into(), key);
    });
    let error = format!("{:#}", VoicePreset::load(&path, &shape).err().unwrap());
    assert!(error.contains("`neg_tts_lm.layers.0.key` has shape"), "{error}");
    std::fs::write(dir.path().join("voice.safetensors"), b"not a preset").unwrap();
    let error = format!("{:#}", VoicePreset::load(&dir.path().join("voice.safetensors"), &shape).err().unwrap());
    assert!(error.contains("not a voice preset"), "{error}");
}

/// `cake tts` recognises the Realtime folder, speaks in the preset's voice
/// (the same seed, the same audio) and says plainly what it cannot use.
#[test]
fn cake_tts_speaks_with_a_preset_and_reports_problems_clearly() {
    let dir = fixture();
    let tmp = tempfile::tempdir().unwrap();
    let (model, preset) = (dir.to_str().unwrap().to_string(), dir.join("voice.safetensors"));
    let preset = preset.to_str().unwrap();
    let speak = |out: &str| {
        let args = ["tts", "--model", &model, "--voice", preset, "--text", "Hello there.", "--out", out];
        let result = common::cake(&[&args[..], &["--seed", "7", "--max-seconds", "1"]].concat());
        assert!(result.status.success(), "{}", String::from_utf8_lossy(&result.stderr));
        cake::audio::wav::read(Path::new(out), 60.0).unwrap().audio.samples
    };
    let (first, second) = (tmp.path().join("a.wav"), tmp.path().join("b.wav"));
    let audio = speak(first.to_str().unwrap());
    // At most one second, in whole frames of 3200 samples at 24 kHz.
    assert!(!audio.is_empty() && audio.len() % 3200 == 0 && audio.len() <= 24000 + 3200, "{}", audio.len());
    assert_eq!(speak(second.to_str().unwrap()), audio, "the same seed speaks the same");

    // With --play, frames are queued to the audio output as they are made: here ALSA's
    // null device, a real output that discards what it is given.
    let alsa = tmp.path().join("asound.conf");
    std::fs::write(&alsa, "</usr/share/alsa/alsa.conf>\npcm.!default { type null }\n").unwrap();
    let played = tmp.path().join("played.wav");
    let args = ["tts", "--model", &model, "--voice", preset, "--text", "Hello there.", "--seed", "7"];
    let result = std::process::Command::new(env!("CARGO_BIN_EXE_cake"))
        .args(args)
        .args(["--max-seconds", "1", "--play", "--out", played.to_str().unwrap()])
        .env("ALSA_CONFIG_PATH", &alsa)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(result.status.success(), "{stderr}");
    assert!(stderr.contains("playing from") && !stderr.contains("unavailable"), "{stderr}");
    assert_eq!(cake::audio::wav::read(&played, 60.0).unwrap().audio.samples, audio);

    let out = tmp.path().join("c.wav");
    let o = out.to_str().unwrap();
    let wav = common::fixture("tiny/vibevoice/voice0.wav");
    let err =
        common::cake_error(&["tts", "--model", &model, "--voice", wav.to_str().unwrap(), "--text", "Hi.", "--out", o]);
    assert!(err.contains("not a voice preset"), "{err}");
    let err = common::cake_error(&[
        "tts", "--model", &model, "--voice", preset, "--voice", preset, "--text", "Hi.", "--out", o,
    ]);
    assert!(err.contains("one --voice preset"), "{err}");
    assert!(!out.exists());
}

/// A preset as Microsoft ships them (`torch.save`, bf16, strided caches)
/// reads as the same voice: every tensor equals the safetensors preset's
/// rounded to bf16.
#[test]
fn a_torch_saved_preset_reads_as_the_same_voice() {
    let model = load_model();
    let shape = model.preset_shape();
    let torch = VoicePreset::load(&fixture().join("voice.pt"), &shape).unwrap();
    let plain = VoicePreset::load(&fixture().join("voice.safetensors"), &shape).unwrap();
    let bf16 = |t: &Tensor| t.to_dtype(DType::BF16).unwrap().to_dtype(DType::F32).unwrap();
    let same = |a: &Tensor, b: &Tensor, what: &str| {
        assert_eq!(a.dims(), b.dims(), "{what}");
        let diff = (a - bf16(b)).unwrap().abs().unwrap().flatten_all().unwrap().max(0).unwrap();
        assert_eq!(diff.to_scalar::<f32>().unwrap(), 0.0, "{what}");
    };
    for (name, t, p) in [("lm", &torch.lm, &plain.lm), ("tts_lm", &torch.tts_lm, &plain.tts_lm)].into_iter().chain([(
        "neg_tts_lm",
        &torch.neg_tts_lm,
        &plain.neg_tts_lm,
    )]) {
        same(&t.last_hidden, &p.last_hidden, &format!("{name} hidden"));
        assert_eq!(t.layers.len(), p.layers.len());
        for (i, ((tk, tv), (pk, pv))) in t.layers.iter().zip(&p.layers).enumerate() {
            same(tk, pk, &format!("{name} key {i}"));
            same(tv, pv, &format!("{name} value {i}"));
        }
    }
}
