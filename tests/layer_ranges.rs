//! Loading only part of a checkpoint, as cluster workers do: sharded
//! folders, header-only sizing, layer-range stages chained into a pipeline,
//! and checkpoints stored in half precision.

mod common;

use cake::models::loader::{Checkpoint, LoadOptions};
use cake::models::sources::folder::{tensor_sizes, SafetensorsFolder};
use cake::models::sources::selection::{layer_index, TensorSelection};
use cake::text::model::TextModel;
use cake::text::perplexity::perplexity;
use candle_core::{DType, Device, Tensor, D};
use common::fixture;
use std::collections::HashMap;
use std::path::Path;

fn reference(family: &str) -> (Vec<u32>, Vec<f64>) {
    let text = std::fs::read_to_string(fixture(&format!("tiny/{family}/reference.json"))).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let tokens = json["nll_tokens"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as u32).collect();
    let nll = json["nll"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
    (tokens, nll)
}

fn assert_nll_close(ours: &[f32], theirs: &[f64], tolerance: f64, what: &str) {
    assert_eq!(ours.len(), theirs.len());
    for (i, (a, b)) in ours.iter().zip(theirs).enumerate() {
        assert!((*a as f64 - b).abs() < tolerance, "{what}: nll[{i}] = {a}, transformers {b}");
    }
}

/// Copies the tokenizer/config files of a fixture and writes its tensors in
/// two shards: embedding + layer 0, then layer 1 + head.
fn sharded_copy(family: &str, dir: &Path) {
    let src = fixture(&format!("tiny/{family}"));
    for name in ["config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json"] {
        std::fs::copy(src.join(name), dir.join(name)).unwrap();
    }
    let tensors = candle_core::safetensors::load(src.join("model.safetensors"), &Device::Cpu).unwrap();
    let (first, second): (HashMap<_, _>, HashMap<_, _>) =
        tensors.into_iter().partition(|(name, _)| name == "model.embed_tokens.weight" || layer_index(name) == Some(0));
    let mut weight_map = serde_json::Map::new();
    for (file, part) in [("model-00001-of-00002.safetensors", &first), ("model-00002-of-00002.safetensors", &second)] {
        candle_core::safetensors::save(part, dir.join(file)).unwrap();
        for name in part.keys() {
            weight_map.insert(name.clone(), file.into());
        }
    }
    let index = serde_json::json!({ "metadata": {}, "weight_map": weight_map });
    std::fs::write(dir.join("model.safetensors.index.json"), index.to_string()).unwrap();
}

fn nll_from_logits(logits: &Tensor, tokens: &[u32]) -> Vec<f32> {
    let log_probs = candle_nn::ops::log_softmax(logits, D::Minus1).unwrap();
    let n = tokens.len() - 1;
    let targets = Tensor::new(&tokens[1..], &Device::Cpu).unwrap().unsqueeze(1).unwrap();
    let picked = log_probs.narrow(0, 0, n).unwrap().gather(&targets, 1).unwrap();
    picked.squeeze(1).unwrap().to_vec1::<f32>().unwrap().into_iter().map(|v| -v).collect()
}

#[test]
fn sharded_folder_gives_the_same_model() {
    let dir = tempfile::tempdir().unwrap();
    sharded_copy("qwen2", dir.path());
    let model = TextModel::load(dir.path(), &LoadOptions::default()).unwrap();
    let (tokens, theirs) = reference("qwen2");
    assert_nll_close(&perplexity(&model, &tokens).unwrap().nll, &theirs, 1e-3, "sharded qwen2");
}

#[test]
fn header_sizes_account_for_every_byte_without_reading_data() {
    let dir = tempfile::tempdir().unwrap();
    sharded_copy("qwen2", dir.path());
    let sizes = tensor_sizes(dir.path()).unwrap();
    let expected: u64 = candle_core::safetensors::load(fixture("tiny/qwen2/model.safetensors"), &Device::Cpu)
        .unwrap()
        .values()
        .map(|t| (t.elem_count() * t.dtype().size_in_bytes()) as u64)
        .sum();
    assert_eq!(sizes.values().sum::<u64>(), expected);
    assert_eq!(sizes["model.embed_tokens.weight"], 300 * 32 * 4);
    let layer1: u64 = sizes.iter().filter(|(n, _)| layer_index(n) == Some(1)).map(|(_, s)| s).sum();
    assert!(layer1 > 0);
}

#[test]
fn a_stage_opens_only_the_shards_it_needs() {
    let dir = tempfile::tempdir().unwrap();
    sharded_copy("qwen2", dir.path());
    let last_stage = TensorSelection { layers: 1..2, embedding: false, head: true };
    // qwen2's head is not tied to its embedding: the embedding's shard stays closed.
    let store = SafetensorsFolder::open(dir.path(), |name| last_stage.wants(name, false)).unwrap();
    let opened: Vec<String> =
        store.opened_files().iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
    assert_eq!(opened, vec!["model-00002-of-00002.safetensors"]);
}

#[test]
fn two_stages_chained_equal_the_whole_model() {
    for family in ["qwen2", "llama_tied", "mistral_window", "olmo2"] {
        let dir = tempfile::tempdir().unwrap();
        sharded_copy(family, dir.path());
        let checkpoint = Checkpoint::open(dir.path()).unwrap();
        let options = LoadOptions::default();
        let first = checkpoint
            .load_decoder(Some(TensorSelection { layers: 0..1, embedding: true, head: false }), &options)
            .unwrap();
        let second = checkpoint
            .load_decoder(Some(TensorSelection { layers: 1..2, embedding: false, head: true }), &options)
            .unwrap();
        let (tokens, theirs) = reference(family);
        let (mut cache_a, mut cache_b) = (first.new_cache(), second.new_cache());
        let hidden = first.forward_layers(&first.embed(&tokens).unwrap(), &mut cache_a).unwrap();
        let hidden = second.forward_layers(&hidden, &mut cache_b).unwrap();
        let logits = second.logits(&hidden, cake::models::decoder::LogitsFor::All).unwrap();
        assert_nll_close(&nll_from_logits(&logits, &tokens), &theirs, 1e-3, family);
        assert!(first.logits(&hidden, cake::models::decoder::LogitsFor::All).is_err(), "first stage has no head");
        assert!(second.embed(&tokens).is_err(), "last stage has no embedding");
    }
}

#[test]
fn half_precision_checkpoint_stays_in_its_dtype_unless_overridden() {
    let dir = tempfile::tempdir().unwrap();
    let src = fixture("tiny/llama_tied");
    for entry in std::fs::read_dir(&src).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), dir.path().join(entry.file_name())).unwrap();
    }
    let tensors = candle_core::safetensors::load(src.join("model.safetensors"), &Device::Cpu).unwrap();
    let bf16: HashMap<String, Tensor> =
        tensors.into_iter().map(|(n, t)| (n, t.to_dtype(DType::BF16).unwrap())).collect();
    candle_core::safetensors::save(&bf16, dir.path().join("model.safetensors")).unwrap();

    let model = TextModel::load(dir.path(), &LoadOptions::default()).unwrap();
    assert_eq!(model.decoder().dtype(), DType::BF16);
    let (tokens, theirs) = reference("llama_tied");
    // bf16 weights and activations: close to the f32 reference, not equal.
    let ours = perplexity(&model, &tokens).unwrap().nll;
    let mean_error = ours.iter().zip(&theirs).map(|(a, b)| (*a as f64 - b).abs()).sum::<f64>() / ours.len() as f64;
    assert!(mean_error < 0.1, "bf16 mean NLL error {mean_error}");

    let forced = TextModel::load(dir.path(), &LoadOptions { dtype: Some(DType::F32), ..Default::default() }).unwrap();
    assert_eq!(forced.decoder().dtype(), DType::F32);
}
