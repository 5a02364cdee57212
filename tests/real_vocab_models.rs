//! Tiny fixtures reading text through their families' published
//! vocabularies: Llama 3's, Qwen2's (Qwen2, Qwen3, Qwen3-MoE, Qwen3-Next),
//! Qwen3.5's and Phi-3's SentencePiece one, from llama.cpp's tokenizer suite,
//! and Gemma 3's (262 144 SentencePiece tokens) from the published Gemma 3
//! 270M file, with llama.cpp's ids recorded in gemma3_270m_llama_cpp.json.
//!
//! `tests/fixtures/real_vocab_models.py` (run by `make real-files`) writes each
//! model into `~/.cache/cake-test/real-vocab-models` (`$CAKE_REAL_VOCAB_MODELS`
//! overrides): the fixture's llama.cpp conversion with the vocabulary's
//! `tokenizer.*` keys and embedding rows for every token.
//! `generate_real_vocab_references.py` put the same rows into transformers'
//! model and wrote `real_vocab/reference.json`. Here `cake` turns one of
//! llama.cpp's test strings into the ids llama.cpp's reference tokenizer
//! gives it, then scores and continues them as transformers does.

mod common;

use common::{cake_json, fixture};
use serde_json::Value;
use std::path::PathBuf;

fn references() -> serde_json::Map<String, Value> {
    let text = std::fs::read_to_string(fixture("real_vocab/reference.json")).expect("real_vocab/reference.json");
    serde_json::from_str(&text).expect("valid JSON")
}

fn model_dir() -> PathBuf {
    std::env::var_os("CAKE_REAL_VOCAB_MODELS").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/cake-test/real-vocab-models")
    })
}

fn ids(value: &Value) -> Vec<u64> {
    value.as_array().expect("array of ids").iter().map(|v| v.as_u64().expect("id")).collect()
}

fn check(pair: &str) {
    let reference = &references()[pair];
    let model = model_dir().join(format!("{pair}.gguf"));
    assert!(
        model.exists(),
        "{} is missing: run `python3 tests/fixtures/real_vocab_models.py` (make test does)",
        model.display()
    );
    let model = model.to_str().unwrap();
    let text = reference["text"].as_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let text_file = dir.path().join("text.txt");
    std::fs::write(&text_file, text).unwrap();

    let scored =
        cake_json(&["perplexity", "--model", model, "--file", text_file.to_str().unwrap(), "--dtype", "f32", "--json"]);
    assert_eq!(ids(&scored["tokens"]), ids(&reference["tokens"]), "{pair}: the text's ids");
    let values = |v: &Value| -> Vec<f64> { v.as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect() };
    let (ours, theirs) = (values(&scored["nll"]), values(&reference["nll"]));
    assert_eq!(ours.len(), theirs.len(), "{pair}: number of scored tokens");
    for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
        assert!((a - b).abs() < 1e-3, "{pair}: nll[{i}] is {a}, transformers says {b}");
    }

    let run = cake_json(&[
        "run",
        "--model",
        model,
        "--prompt",
        text,
        "--temperature",
        "0",
        "--max-tokens",
        "8",
        "--ignore-eos",
        "--dtype",
        "f32",
        "--json",
    ]);
    assert_eq!(ids(&run["prompt_tokens"]), ids(&reference["tokens"]), "{pair}: the prompt's ids");
    assert_eq!(ids(&run["tokens"]), ids(&reference["greedy_tokens"]), "{pair}: greedy continuation");
}

macro_rules! pair_tests {
    ($($test:ident => $pair:literal),* $(,)?) => {
        const PAIRS: &[&str] = &[$($pair),*];
        $(
        #[test]
        fn $test() {
            check($pair);
        }
        )*
    };
}

pair_tests! {
    llama_tied_with_llama3_vocabulary => "llama_tied+llama-bpe",
    qwen2_with_qwen2_vocabulary => "qwen2+qwen2",
    qwen3_with_qwen2_vocabulary => "qwen3+qwen2",
    qwen3_moe_with_qwen2_vocabulary => "qwen3_moe_sparse+qwen2",
    qwen3_next_with_qwen2_vocabulary => "qwen3_next_sparse+qwen2",
    qwen3_5_hybrid_with_qwen35_vocabulary => "qwen3_5_hybrid+qwen35",
    qwen3_5_moe_with_qwen35_vocabulary => "qwen3_5_moe+qwen35",
    phi3_with_phi3_vocabulary => "phi3_window+phi-3",
    gemma3_with_gemma3_vocabulary => "gemma3_gguf+gemma3-270m",
}

#[test]
fn every_reference_pair_has_its_test() {
    let mut listed: Vec<&str> = PAIRS.to_vec();
    listed.sort();
    let mut referenced: Vec<String> = references().keys().cloned().collect();
    referenced.sort();
    assert_eq!(listed, referenced, "pair_tests! and real_vocab/reference.json disagree");
}
