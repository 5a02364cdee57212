//! Embedding models: tiny Qwen3 checkpoints in Qwen3-Embedding's released
//! layout (a base model with sentence-transformers' pooling files, made by
//! `tests/fixtures/generate_tiny_embedding.py`) give transformers' vectors,
//! pooled on the last token or the mean; through `cake serve`'s OpenAI and
//! Ollama routes too, and a chat model is refused.

mod common;

use cake::text::embedding::{embed, Pooling};
use cake::text::model::{LoadOptions, TextModel};
use common::fixture;
use common::server::{data_dir_with_default_model, Server};
use serde_json::{json, Value};

fn reference(name: &str) -> Value {
    let text = std::fs::read_to_string(fixture(&format!("tiny/{name}/embeddings.json"))).expect("embeddings.json");
    serde_json::from_str(&text).expect("valid JSON")
}

fn floats(value: &Value) -> Vec<f64> {
    value.as_array().expect("list").iter().map(|v| v.as_f64().expect("number")).collect()
}

/// The largest difference between two vectors of the same length.
fn largest_gap(ours: &[f64], theirs: &[f64]) -> f64 {
    assert_eq!(ours.len(), theirs.len());
    ours.iter().zip(theirs).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max)
}

#[test]
fn vectors_equal_transformers_for_last_token_and_mean_pooling() {
    for (name, pooling) in [("qwen3_embedding", Pooling::LastToken), ("qwen3_embedding_mean", Pooling::Mean)] {
        let model = TextModel::load(&fixture(&format!("tiny/{name}")), &LoadOptions::default()).unwrap();
        let spec = model.embedding.unwrap_or_else(|| panic!("{name} is an embedding model"));
        assert_eq!((spec.pooling, spec.normalize), (pooling, true), "{name}");
        for case in reference(name)["cases"].as_array().unwrap() {
            let tokens = model.tokenizer().unwrap().encode(case["text"].as_str().unwrap(), true).unwrap();
            let expected: Vec<u32> =
                case["tokens"].as_array().unwrap().iter().map(|t| t.as_u64().unwrap() as u32).collect();
            assert_eq!(tokens, expected, "{name}: tokens of {}", case["text"]);
            let ours: Vec<f64> = embed(&model, spec, &tokens).unwrap().into_iter().map(f64::from).collect();
            let gap = largest_gap(&ours, &floats(&case["embedding"]));
            assert!(gap < 1e-4, "{name}: {}: differs from transformers by {gap}", case["text"]);
        }
    }
    let chat = TextModel::load(&fixture("tiny/qwen3"), &LoadOptions::default()).unwrap();
    assert!(chat.embedding.is_none(), "a chat model says nothing of pooling");
}

#[test]
fn the_openai_and_ollama_routes_embed_and_a_chat_model_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let data = data_dir_with_default_model(root.path());
    let folder = fixture("tiny/qwen3_embedding");
    let server = Server::start(&data, &root.path().join("hf-cache"), &["--model", folder.to_str().unwrap()]);
    let cases = reference("qwen3_embedding")["cases"].as_array().unwrap().clone();
    let texts: Vec<&str> = cases.iter().map(|c| c["text"].as_str().unwrap()).collect();

    let (status, reply) = server.post("/v1/embeddings", &json!({"model": "qwen3_embedding", "input": texts}));
    assert_eq!(status, 200, "{reply}");
    for (item, case) in reply["data"].as_array().unwrap().iter().zip(&cases) {
        assert!(largest_gap(&floats(&item["embedding"]), &floats(&case["embedding"])) < 1e-4, "{item}");
    }
    let tokens: usize = cases.iter().map(|c| c["tokens"].as_array().unwrap().len()).sum();
    assert_eq!(reply["usage"]["prompt_tokens"], tokens);

    let (status, reply) = server.post("/api/embed", &json!({"model": "qwen3_embedding", "input": texts[0]}));
    assert_eq!(status, 200, "{reply}");
    assert!(largest_gap(&floats(&reply["embeddings"][0]), &floats(&cases[0]["embedding"])) < 1e-4, "{reply}");
    let (status, reply) = server.post("/api/embeddings", &json!({"model": "qwen3_embedding", "prompt": texts[1]}));
    assert_eq!(status, 200, "{reply}");
    assert!(largest_gap(&floats(&reply["embedding"]), &floats(&cases[1]["embedding"])) < 1e-4, "{reply}");

    let (status, reply) = server.post("/v1/embeddings", &json!({"model": "default", "input": "hello"}));
    assert_eq!(status, 400, "{reply}");
    let message = reply["error"]["message"].as_str().unwrap();
    assert!(message.ends_with("is a chat model, not an embedding model"), "{reply}");

    // The library knows the embedding model for what it is: listed as
    // one, shown with Ollama's `embedding` capability, and it does not chat.
    let (_, library) = server.post("/app/list_models", &json!({}));
    let listed = library["models"].as_array().unwrap().iter().find(|m| m["name"] == "qwen3_embedding").expect("listed");
    assert_eq!(listed["kind"], "embedding", "{listed}");
    let (_, tags) = server.get("/api/tags");
    assert!(tags["models"].as_array().unwrap().iter().any(|m| m["name"] == "qwen3_embedding"), "{tags}");
    let (status, shown) = server.post("/api/show", &json!({"model": "qwen3_embedding"}));
    assert_eq!((status, &shown["capabilities"]), (200, &json!(["embedding"])), "{shown}");
    let question = json!({"model": "qwen3_embedding", "messages": [{"role": "user", "content": "Hi"}]});
    let (status, reply) = server.post("/v1/chat/completions", &question);
    assert_eq!(status, 400, "{reply}");
    assert!(reply["error"]["message"].as_str().unwrap().contains("is an embedding model, not a chat model"), "{reply}");
    let (status, reply) = server.post("/v1/embeddings", &json!({"model": "qwen3_embedding", "input": []}));
    assert_eq!(status, 400, "{reply}");
}
