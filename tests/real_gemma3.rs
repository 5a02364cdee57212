//! A published SentencePiece model: Gemma 3 270M, Q4_K_M, as distributed
//! (`scripts/fetch_gemma3_270m.py`, run by `make test`, keeps it in
//! `~/.cache/cake-test`; `$CAKE_GEMMA3_270M` names another path), against
//! what llama.cpp computed on the same file
//! (`tests/fixtures/gemma3_270m_llama_cpp.json`, written by
//! `generate_gemma3_270m_reference.py`).

mod common;

use cake::formats::gguf::GgufFile;
use cake::text::tokenizer::TextTokenizer;
use common::{cake_json, fixture, join_ids};
use serde_json::{json, Value};
use std::path::PathBuf;

/// Where llama.cpp's best token led its second by less than this (in
/// logits), the two engines' rounding of the 4-bit weights may pick either;
/// anywhere else their greedy replies must agree.
const NEAR_TIE: f64 = 0.25;

fn model() -> PathBuf {
    let path = std::env::var_os("CAKE_GEMMA3_270M").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/cake-test/gemma-3-270m-q4_k_m.gguf")
    });
    assert!(
        path.exists(),
        "{} is missing: run `python3 scripts/fetch_gemma3_270m.py` (make test does)",
        path.display()
    );
    path
}

fn reference() -> Value {
    let text = std::fs::read_to_string(fixture("gemma3_270m_llama_cpp.json")).expect("reference file");
    serde_json::from_str(&text).expect("valid JSON")
}

fn ids(value: &Value) -> Vec<u64> {
    value.as_array().expect("array of ids").iter().map(|v| v.as_u64().expect("id")).collect()
}

fn floats(value: &Value) -> Vec<f64> {
    value.as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect()
}

/// The tokenizer `cake run --prompt` uses: BOS added, the vocabulary's
/// special tokens read as such (as llama.cpp reads a prompt).
#[test]
fn token_ids_equal_llama_cpp() {
    let tokenizer = TextTokenizer::from_gguf(&GgufFile::open(&model()).unwrap()).unwrap();
    let reference = reference();
    let strings = reference["strings"].as_array().unwrap();
    let differing: Vec<String> = strings
        .iter()
        .filter_map(|case| {
            let text = case["text"].as_str().unwrap();
            let ours: Vec<u64> = tokenizer.encode(text, true).unwrap().into_iter().map(u64::from).collect();
            (ours != ids(&case["ids"])).then(|| format!("{text:?}: cake {ours:?}, llama.cpp {:?}", ids(&case["ids"])))
        })
        .collect();
    assert!(differing.is_empty(), "{} of {} strings differ:\n{}", differing.len(), strings.len(), differing.join("\n"));
}

#[test]
fn greedy_replies_equal_llama_cpp_up_to_a_near_tie() {
    let model = model();
    for case in reference()["replies"].as_array().unwrap() {
        let prompt = case["prompt"].as_str().unwrap();
        let theirs = ids(&case["tokens"]);
        let out = cake_json(&[
            "run",
            "--model",
            model.to_str().unwrap(),
            "--prompt",
            prompt,
            "--temperature",
            "0",
            "--max-tokens",
            &theirs.len().to_string(),
            "--json",
        ]);
        assert_eq!(ids(&out["prompt_tokens"]), ids(&case["prompt_tokens"]), "{prompt:?}: prompt ids");
        let ours = ids(&out["tokens"]);
        let parted = ours.iter().zip(&theirs).take_while(|(a, b)| a == b).count();
        if parted < theirs.len() {
            let gap = floats(&case["gaps"])[parted];
            assert!(
                gap < NEAR_TIE,
                "{prompt:?}: Cake's reply {ours:?} parts from llama.cpp's {theirs:?} at token {parted}, \
                 where llama.cpp's choice led by {gap:.3}"
            );
        }
        eprintln!("{prompt:?}: {parted} of {} tokens equal", theirs.len());
    }
}

/// Per-token NLL of 256 tokens of prose, against the exact computation on
/// the same weights (Cake dequantizing them to f32, the path every tiny
/// fixture checks against transformers): Cake's 4-bit kernels stay at
/// least as close to it as llama.cpp's.
#[test]
fn nll_is_no_further_from_the_exact_computation_than_llama_cpp() {
    let model = model();
    let reference = reference();
    let tokens = join_ids(&ids(&reference["nll_tokens"]));
    let nll = |dtype: Option<&str>| {
        let mut args = vec!["perplexity", "--model", model.to_str().unwrap(), "--tokens", &tokens, "--json"];
        args.extend(dtype.map(|d| ["--dtype", d]).iter().flatten());
        floats(&cake_json(&args)["nll"])
    };
    let (exact, ours, theirs) = (nll(Some("f32")), nll(None), floats(&reference["nll"]));
    assert_eq!(exact.len(), theirs.len());
    let distance =
        |values: &[f64]| values.iter().zip(&exact).map(|(a, b)| (a - b).abs()).sum::<f64>() / exact.len() as f64;
    let (cake, llama) = (distance(&ours), distance(&theirs));
    eprintln!("mean |ΔNLL| from the exact computation: Cake {cake:.4}, llama.cpp {llama:.4}");
    assert!(cake <= llama, "Cake's NLL is {cake:.4} from the exact computation, llama.cpp's {llama:.4}");
}

/// `cake serve` answers a chat on the file: the file has no chat template,
/// so Gemma's turns are used, and the reply stops at `<end_of_turn>` or the
/// limit without ever showing a turn marker.
#[test]
fn serve_answers_a_chat_in_gemma_turns() {
    let root = tempfile::tempdir().unwrap();
    let model = model();
    let server = common::server::Server::start(
        &root.path().join("data"),
        &root.path().join("hf"),
        &["--model", model.to_str().unwrap()],
    );
    let (_, models) = server.get("/v1/models");
    let id = models["data"][0]["id"].as_str().expect("the model is listed").to_string();
    let body = json!({"model": id, "messages": [{"role": "user", "content": "Name a color."}],
        "max_tokens": 24, "temperature": 0});
    let (status, reply) = server.post("/v1/chat/completions", &body);
    assert_eq!(status, 200, "{reply}");
    let content = reply["choices"][0]["message"]["content"].as_str().unwrap();
    eprintln!("reply: {content:?}");
    assert!(!content.trim().is_empty(), "{reply}");
    for marker in ["<start_of_turn>", "<end_of_turn>", "<|im_start|>", "<|im_end|>"] {
        assert!(!content.contains(marker), "{marker} in the reply: {content:?}");
    }
}

/// Released Gemma 3 GGUF vocabularies lack `<image_soft_token>`, which
/// transformers adds past the SentencePiece pieces (id 262 144): a picture
/// reader loaded from an mmproj file adds it there, a spelled picture
/// tokenizes to it, and a prompt holding it runs, its positions taking the
/// picture's embeddings whatever their ids.
#[test]
fn a_picture_placeholder_past_the_vocabulary_runs() {
    use cake::models::decoder::LogitsFor;
    use cake::models::vision::PictureVocabulary;
    use cake::text::model::{LoadOptions, TextModel};
    use cake::text::pictures::PromptPicture;
    use candle_core::{Device, Tensor};

    let path = model();
    let mut tokenizer = TextTokenizer::from_gguf(&GgufFile::open(&path).unwrap()).unwrap();
    assert_eq!(tokenizer.id("<image_soft_token>"), None, "the released vocabulary lacks it");
    let soft = tokenizer.add_placeholder("<image_soft_token>").unwrap();
    assert_eq!(soft, 262_144);
    let question = "What is this?";
    let picture = format!("<start_of_image>{}<end_of_image>", "<image_soft_token>".repeat(4));
    let spelled = format!("<start_of_turn>user\n\n\n{picture}\n\n{question}<end_of_turn>\n<start_of_turn>model\n");
    let tokens = tokenizer.encode_chat(&spelled, &[question]).unwrap();
    let start = tokens.iter().position(|&t| t == 255_999).expect("<start_of_image>") + 1;
    assert_eq!((&tokens[start..start + 4], tokens[start + 4]), (&[soft; 4][..], 256_000), "{tokens:?}");

    let model = TextModel::load(&path, &LoadOptions::default()).unwrap();
    let width = model.decoder().config.hidden_size;
    let embeddings = Tensor::randn(0f32, 1.0, (4, width), &Device::Cpu).unwrap();
    let picture = PromptPicture { start, embeddings, digest: [1; 32], mutual: true };
    let last_logits = |tokens: &[u32]| {
        let mut session = model.new_session();
        let logits = model.forward_with(tokens, 0, std::slice::from_ref(&picture), &mut session, LogitsFor::Last);
        model.end_session(session);
        logits.unwrap().to_vec2::<f32>().unwrap()
    };
    let mut other_ids = tokens.clone();
    other_ids[start..start + 4].fill(107);
    assert_eq!(last_logits(&tokens), last_logits(&other_ids));
}
