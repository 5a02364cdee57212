//! Vision towers against transformers on tiny random checkpoints in the
//! released layouts (tests/fixtures/generate_tiny_vision.py).

mod common;

use base64::Engine;
use cake::images::pixels::{pixel_values, Normalization};
use cake::images::resize::{resize, Filter};
use cake::models::vision::gemma3_projector::Gemma3Projector;
use cake::models::vision::siglip::{SiglipConfig, SiglipVision, Tensors};
use common::computed_picture;
use serde_json::Value;
use std::path::PathBuf;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures").join(name)
}

/// A float32 array of reference.json: its shape and values.
fn array(value: &Value) -> (Vec<usize>, Vec<f32>) {
    let shape = value["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect();
    let bytes = base64::engine::general_purpose::STANDARD.decode(value["f32"].as_str().unwrap()).unwrap();
    (shape, bytes.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect())
}

/// The largest difference between `ours` and `expected`, relative to the
/// largest expected magnitude.
fn relative_error(ours: &[f32], expected: &[f32]) -> f32 {
    assert_eq!(ours.len(), expected.len());
    let scale = expected.iter().fold(0f32, |m, v| m.max(v.abs()));
    ours.iter().zip(expected).fold(0f32, |m, (a, b)| m.max((a - b).abs())) / scale
}

/// Gemma 3: the processor's pixel values bit for bit, the SigLIP tower's
/// last hidden state and the projector's soft tokens within 2e-6 of the
/// largest value of transformers' (float32 both).
#[test]
fn gemma3_vision_tower_matches_transformers() {
    let folder = fixture("tiny/gemma3_vision");
    let config: Value = serde_json::from_str(&std::fs::read_to_string(folder.join("config.json")).unwrap()).unwrap();
    let reference: Value =
        serde_json::from_str(&std::fs::read_to_string(folder.join("reference.json")).unwrap()).unwrap();
    let vision: SiglipConfig = serde_json::from_value(config["vision_config"].clone()).unwrap();
    let size = vision.image_size as u32;
    let picture = computed_picture(90, 30);
    let pixels = pixel_values(&resize(&picture, size, size, Filter::Bilinear), &Normalization::HALF);
    let (shape, expected_pixels) = array(&reference["pixel_values"]);
    assert_eq!(shape, [3, vision.image_size, vision.image_size]);
    assert!(pixels.iter().zip(&expected_pixels).all(|(a, b)| a.to_bits() == b.to_bits()), "pixel values differ");

    let tensors = Tensors::open(&folder).unwrap();
    let eps = vision.layer_norm_eps;
    let side = vision.patches_per_side();
    let tower = SiglipVision::load(vision, &tensors, "vision_tower.vision_model").unwrap();
    let hidden = tower.forward(&pixels).unwrap();
    let (_, expected_hidden) = array(&reference["vision_hidden"]);
    let ours: Vec<f32> = hidden.flatten_all().unwrap().to_vec1().unwrap();
    let error = relative_error(&ours, &expected_hidden);
    // 4e-7 here; tanh-GELU swapped for erf-GELU gives 5e-6.
    assert!(error < 2e-6, "vision hidden states differ by {error}");

    let tokens = config["mm_tokens_per_image"].as_u64().unwrap() as usize;
    let projector = Gemma3Projector::load(&tensors, side, tokens, eps).unwrap();
    let features = projector.forward(&hidden).unwrap();
    let (shape, expected_features) = array(&reference["image_features"]);
    assert_eq!(features.dims(), shape.as_slice());
    let ours: Vec<f32> = features.flatten_all().unwrap().to_vec1().unwrap();
    let error = relative_error(&ours, &expected_features);
    assert!(error < 2e-6, "image features differ by {error}");
}
