//! The loader asks for exactly the tensors of the real VibeVoice-1.5B, with
//! the reference's shapes, so a downloaded checkpoint will load. The names
//! and shapes come from Microsoft's model class built with the released
//! configuration on torch's meta device
//! (tests/fixtures/dump_vibevoice_1_5b_state_dict.py); here every tensor is
//! served as a broadcast zero, so nothing of the 2.7 B weights is allocated.

mod common;

use cake::speech::vibevoice::config::VibeVoiceConfig;
use cake::speech::vibevoice::model::VibeVoice;
use cake::text::tokenizer::TextTokenizer;
use candle_core::DType;
use common::shape_only::ShapeOnly;
use std::collections::BTreeMap;
use std::sync::Arc;

#[test]
fn the_loader_reads_every_tensor_of_the_real_1_5b_layout_with_its_shape() {
    let dir = common::fixture("vibevoice_1_5b");
    let reference: BTreeMap<String, Vec<usize>> =
        serde_json::from_str(&std::fs::read_to_string(dir.join("state_dict.json")).unwrap()).unwrap();
    let store = ShapeOnly { shapes: Arc::new(reference.clone()), loaded: Arc::default() };
    let config = VibeVoiceConfig::from_dir(&dir).unwrap();
    assert_eq!(config.acoustic.hop(), 3200);
    assert_eq!(config.acoustic.encoder_strides, vec![2, 2, 4, 5, 5, 8]);
    assert_eq!(config.acoustic.decoder_depths, vec![8, 3, 3, 3, 3, 3, 3]);
    // The real checkpoints ship no tokenizer; any with the speech tokens serves here.
    let tokenizer = TextTokenizer::from_folder(&common::fixture("tiny/vibevoice")).unwrap();
    let model =
        VibeVoice::load_from(config, tokenizer, Box::new(store.clone()), Box::new(store.clone()), DType::F32).unwrap();
    assert_eq!(model.language_model.decoder.config.num_hidden_layers(), 28);
    let loaded = store.loaded.lock().unwrap().clone();
    let missing: Vec<&String> = reference.keys().filter(|k| !loaded.contains_key(*k)).collect();
    assert!(missing.is_empty(), "tensors of the checkpoint the loader never reads: {missing:?}");
    assert_eq!(loaded, reference);
}
