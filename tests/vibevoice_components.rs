//! VibeVoice's components against Microsoft's reference package on the tiny
//! random checkpoint of tests/fixtures/tiny/vibevoice (made by
//! generate_tiny_vibevoice.py; see docs/vibevoice.md §14): the scheduler,
//! the diffusion head under classifier-free guidance, the connectors, the
//! speech encoders and the streaming decoder.

mod common;

use cake::formats::safetensors::SafetensorsFile;
use cake::models::sources::folder::SafetensorsFolder;
use cake::models::weights::{LoadPolicy, Weights};
use cake::speech::vibevoice::config::VibeVoiceConfig;
use cake::speech::vibevoice::connector::SpeechConnector;
use cake::speech::vibevoice::diffusion_head::DiffusionHead;
use cake::speech::vibevoice::scheduler::DpmSolver;
use cake::speech::vibevoice::speech_tokenizer::{Decoder, Encoder, StreamState};
use candle_core::{DType, Device, Tensor, D};
use std::path::PathBuf;

const CFG_SCALE: f64 = 1.3;

fn dir() -> PathBuf {
    common::fixture("tiny/vibevoice")
}

struct Fixture {
    config: VibeVoiceConfig,
    weights: Weights,
    reference: SafetensorsFile,
}

fn fixture() -> Fixture {
    let store = SafetensorsFolder::open(&dir(), |_| true).unwrap();
    let policy = LoadPolicy { dtype: DType::F32, keep_quantized: false };
    Fixture {
        config: VibeVoiceConfig::from_dir(&dir()).unwrap(),
        weights: Weights::new(Box::new(store), policy, Device::Cpu),
        reference: SafetensorsFile::open(&dir().join("reference.safetensors")).unwrap(),
    }
}

impl Fixture {
    fn get(&self, name: &str) -> Tensor {
        self.reference
            .load(name, &Device::Cpu)
            .unwrap_or_else(|e| panic!("{name}: {e:#}"))
            .to_dtype(DType::F32)
            .unwrap()
    }
}

/// Largest |a − b| relative to the largest |b|.
fn relative_error(a: &Tensor, b: &Tensor) -> f32 {
    assert_eq!(a.dims(), b.dims(), "shapes differ");
    let diff = (a - b).unwrap().abs().unwrap().flatten_all().unwrap().max(0).unwrap().to_scalar::<f32>().unwrap();
    let scale = b.abs().unwrap().flatten_all().unwrap().max(0).unwrap().to_scalar::<f32>().unwrap();
    diff / scale.max(1e-12)
}

fn assert_close(what: &str, a: &Tensor, b: &Tensor, tolerance: f32) {
    let error = relative_error(a, b);
    assert!(error <= tolerance, "{what}: relative error {error:e} > {tolerance:e}");
}

#[test]
fn scheduler_tables_and_a_full_solver_run_match() {
    let f = fixture();
    for steps in [10, 20] {
        let solver = DpmSolver::new(steps).unwrap();
        let expected: Vec<i64> = f
            .reference
            .load(&format!("sched.{steps}.timesteps"), &Device::Cpu)
            .unwrap()
            .to_dtype(DType::I64)
            .unwrap()
            .to_vec1()
            .unwrap();
        let got: Vec<i64> = solver.timesteps().iter().map(|&t| t as i64).collect();
        assert_eq!(got, expected);
        let sigmas = Tensor::new(solver.sigmas(), &Device::Cpu).unwrap();
        assert_close("sigmas", &sigmas, &f.get(&format!("sched.{steps}.sigmas")), 1e-6);
        // The solver alone, with a fixed velocity function.
        let out = solver
            .sample(
                &f.get("sched.noise"),
                |x, _| Ok(((x * 0.5)? + 0.1)?),
                |i, _, x| {
                    assert_close(
                        &format!("{steps} steps, step {i}"),
                        x,
                        &f.get(&format!("sched.{steps}.fake.{i}")),
                        1e-5,
                    );
                },
            )
            .unwrap();
        assert_close("fake solver output", &out, &f.get(&format!("sched.{steps}.fake.out")), 1e-5);
    }
}

#[test]
fn diffusion_head_with_guidance_matches_every_step() {
    let f = fixture();
    let head = DiffusionHead::load(&f.weights, "model.prediction_head", &f.config.diffusion_head).unwrap();
    let condition = f.get("sched.cond");
    for steps in [10, 20] {
        let solver = DpmSolver::new(steps).unwrap();
        let mut index = 0;
        let noise = f.get("sched.noise").narrow(0, 0, 1).unwrap();
        let out = solver
            .sample(
                &noise,
                |x, t| {
                    let both = Tensor::cat(&[x, x], 0)?;
                    let v = head.forward(&both, t as f32, &condition)?;
                    assert_close(
                        &format!("{steps}: head {index}"),
                        &v,
                        &f.get(&format!("sched.{steps}.head.{index}.v")),
                        1e-4,
                    );
                    let (c, u) = (v.narrow(0, 0, 1)?, v.narrow(0, 1, 1)?);
                    let guided = (&u + ((c - &u)? * CFG_SCALE)?)?;
                    assert_close(
                        &format!("{steps}: guided {index}"),
                        &guided,
                        &f.get(&format!("sched.{steps}.head.{index}.guided")),
                        1e-4,
                    );
                    index += 1;
                    Ok(guided)
                },
                |i, x0, _| {
                    let want = f.get(&format!("sched.{steps}.head.{i}.x0")).narrow(0, 0, 1).unwrap();
                    assert_close(&format!("{steps}: x0 {i}"), x0, &want, 1e-4);
                },
            )
            .unwrap();
        assert_close(&format!("{steps}: sampled latent"), &out, &f.get(&format!("sched.{steps}.head.out")), 1e-4);
    }
}

#[test]
fn connectors_match_on_every_generated_frame() {
    let f = fixture();
    let hidden = 48;
    let acoustic =
        SpeechConnector::load(&f.weights, "model.acoustic_connector", f.config.acoustic.vae_dim, hidden).unwrap();
    let semantic =
        SpeechConnector::load(&f.weights, "model.semantic_connector", f.config.semantic.vae_dim, hidden).unwrap();
    for frame in 0..5 {
        let p = format!("frame{frame}");
        let a = acoustic.forward(&f.get(&format!("{p}.acoustic_connector.in"))).unwrap();
        assert_close(&format!("{p} acoustic"), &a, &f.get(&format!("{p}.acoustic_connector.out")), 1e-5);
        let s = semantic.forward(&f.get(&format!("{p}.semantic_connector.in"))).unwrap();
        assert_close(&format!("{p} semantic"), &s, &f.get(&format!("{p}.semantic_connector.out")), 1e-5);
    }
    let prefill = acoustic.forward(&f.get("prefill.acoustic_connector.in")).unwrap();
    assert_close("voice prompt", &prefill, &f.get("prefill.acoustic_connector.out"), 1e-5);
}

#[test]
fn encoders_match_whole_and_streamed() {
    let f = fixture();
    let acoustic = Encoder::load(&f.weights, "model.acoustic_tokenizer.encoder", &f.config.acoustic).unwrap();
    let voices = f.get("proc.speech_tensors").unsqueeze(1).unwrap();
    assert_close("acoustic encoder", &acoustic.encode(&voices).unwrap(), &f.get("enc.acoustic_mean"), 1e-4);

    let semantic = Encoder::load(&f.weights, "model.semantic_tokenizer.encoder", &f.config.semantic).unwrap();
    assert_close("semantic encoder (voices)", &semantic.encode(&voices).unwrap(), &f.get("enc.semantic_mean"), 1e-4);
    let audio = f.get("semenc.audio");
    let whole = semantic.encode(&audio).unwrap();
    assert_close("semantic encoder", &whole, &f.get("semenc.whole"), 1e-4);
    let mut state = StreamState::default();
    let hop = f.config.semantic.hop();
    let frames: Vec<Tensor> = (0..audio.dim(D::Minus1).unwrap() / hop)
        .map(|i| semantic.encode_stream(&audio.narrow(D::Minus1, i * hop, hop).unwrap(), &mut state).unwrap())
        .collect();
    let streamed = Tensor::cat(&frames, 1).unwrap();
    assert_close("semantic encoder, streamed", &streamed, &f.get("semenc.stream"), 1e-4);
    assert_close("streamed = whole", &streamed, &whole, 1e-4);
}

#[test]
fn decoder_matches_whole_and_streamed_frame_by_frame() {
    let f = fixture();
    let decoder = Decoder::load(&f.weights, "model.acoustic_tokenizer.decoder", &f.config.acoustic).unwrap();
    let latents = f.get("dec.latents");
    let whole = decoder.decode(&latents).unwrap();
    assert_close("decoder", &whole, &f.get("dec.whole"), 1e-4);
    let mut state = StreamState::default();
    let chunks: Vec<Tensor> = (0..latents.dim(D::Minus1).unwrap())
        .map(|i| decoder.decode_stream(&latents.narrow(D::Minus1, i, 1).unwrap(), &mut state).unwrap())
        .collect();
    let streamed = Tensor::cat(&chunks, D::Minus1).unwrap();
    assert_close("decoder, streamed", &streamed, &f.get("dec.stream"), 1e-4);
    // Each generated frame of the reference run, decoded as it streamed.
    let mut state = StreamState::default();
    for frame in 0..3 {
        let p = format!("frame{frame}");
        let audio = decoder.decode_stream(&f.get(&format!("{p}.acoustic_decoder.in")), &mut state).unwrap();
        assert_close(&p, &audio, &f.get(&format!("{p}.acoustic_decoder.out")), 1e-4);
    }
}
