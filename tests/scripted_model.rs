//! The scripted Qwen3 (`tests/fixtures/tiny/qwen3_scripted`, trained by
//! `generate_scripted_model.py` to write reasoning blocks and tool calls):
//! Cake renders and reads its conversations as transformers did, writes the
//! scripted replies, and every route keeps the reasoning apart from the
//! answer.

mod common;

use cake::text::chat_template::{ChatMessage, RenderOptions};
use cake::text::model::{LoadOptions, TextModel};
use common::server::{data_dir_with_default_model, Server};
use common::{cake_json, fixture, join_ids};
use serde_json::{json, Value};

fn script() -> Value {
    let text = std::fs::read_to_string(fixture("tiny/qwen3_scripted/script.json")).expect("script.json");
    serde_json::from_str(&text).expect("valid JSON")
}

fn ids(value: &Value) -> Vec<u64> {
    value.as_array().expect("ids").iter().map(|v| v.as_u64().expect("id")).collect()
}

/// The scripted conversations without tools (tools come with tool calling).
const PLAIN: [&str; 3] = ["think", "no_think", "think_alone"];

#[test]
fn prompts_render_and_tokenize_as_transformers_and_greedy_replies_follow_the_script() {
    let model = TextModel::load(&fixture("tiny/qwen3_scripted"), &LoadOptions::default()).unwrap();
    let (template, tokenizer) = (model.chat_template().unwrap(), model.tokenizer().unwrap());
    assert!(template.thinks());
    let script = script();
    for name in PLAIN {
        let case = &script[name];
        let messages: Vec<ChatMessage> = serde_json::from_value(case["messages"].clone()).unwrap();
        let options = RenderOptions { enable_thinking: case["enable_thinking"].as_bool() };
        let rendered = template.render_with(&messages, true, &options).unwrap();
        assert_eq!(rendered, case["prompt"].as_str().unwrap(), "{name}: rendered prompt");
        let written: Vec<&str> = messages.iter().map(|m| m.content.as_str()).collect();
        let tokens: Vec<u64> = tokenizer.encode_chat(&rendered, &written).unwrap().into_iter().map(u64::from).collect();
        assert_eq!(tokens, ids(&case["prompt_tokens"]), "{name}: prompt tokens");

        let prompt = join_ids(&tokens);
        let path = fixture("tiny/qwen3_scripted");
        let out = cake_json(&[
            "run",
            "--model",
            path.to_str().unwrap(),
            "--prompt-tokens",
            &prompt,
            "--temperature",
            "0",
            "--max-tokens",
            "64",
            "--json",
        ]);
        // The script's replies end with the end-of-turn token; `cake run` stops on it.
        let reply = ids(&case["reply_tokens"]);
        assert_eq!(ids(&out["tokens"]), reply[..reply.len() - 1], "{name}: greedy reply");
        assert_eq!(out["finish_reason"], "eos", "{name}");
    }
}

/// A server with the scripted model imported; its id.
fn serve(root: &std::path::Path) -> (Server, String) {
    let data = data_dir_with_default_model(root);
    let server = Server::start(&data, &root.join("hf-cache"), &[]);
    let (status, entry) = server.post("/app/import_model", &json!({"path": fixture("tiny/qwen3_scripted")}));
    assert_eq!(status, 200, "{entry}");
    let id = entry["id"].as_str().unwrap().to_string();
    (server, id)
}

/// The scripted reply's reasoning and answer, split as a reader would.
fn scripted_parts(name: &str) -> (String, String) {
    let reply = script()[name]["reply"].as_str().unwrap().to_string();
    match reply.split_once("</think>") {
        Some((reasoning, answer)) => {
            (reasoning.trim_start_matches("<think>").to_string(), answer.trim_start().to_string())
        }
        None => (String::new(), reply),
    }
}

fn openai_body(model: &str, name: &str, stream: bool) -> Value {
    let case = &script()[name];
    let mut body = json!({"model": model, "messages": case["messages"], "temperature": 0, "stream": stream});
    if case["enable_thinking"] == json!(false) {
        body["reasoning_effort"] = json!("none");
    }
    body
}

#[test]
fn every_route_keeps_the_reasoning_apart_from_the_answer() {
    let root = tempfile::tempdir().unwrap();
    let (server, model) = serve(root.path());
    let (reasoning, answer) = scripted_parts("think");
    assert!(!reasoning.is_empty() && !answer.contains("think"), "the script has a reasoning block");

    // OpenAI, whole.
    let (status, reply) = server.post("/v1/chat/completions", &openai_body(&model, "think", false));
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["choices"][0]["message"]["content"], json!(answer));
    assert_eq!(reply["choices"][0]["message"]["reasoning_content"], json!(reasoning));

    // OpenAI, streamed: reasoning deltas, then content deltas.
    let (status, payloads) = server.stream("/v1/chat/completions", &openai_body(&model, "think", true), |_, _| true);
    assert_eq!(status, 200);
    let (mut streamed_reasoning, mut streamed_answer) = (String::new(), String::new());
    for payload in payloads.iter().filter(|p| *p != "[DONE]") {
        let chunk: Value = serde_json::from_str(payload).unwrap();
        let delta = &chunk["choices"][0]["delta"];
        if let Some(piece) = delta["reasoning_content"].as_str() {
            assert!(streamed_answer.is_empty(), "reasoning after the answer began: {payloads:?}");
            streamed_reasoning.push_str(piece);
        }
        streamed_answer.push_str(delta["content"].as_str().unwrap_or(""));
    }
    assert_eq!((streamed_reasoning.as_str(), streamed_answer.as_str()), (reasoning.as_str(), answer.as_str()));

    // Switched off: the template closes the block in the prompt, no reasoning.
    let (status, reply) = server.post("/v1/chat/completions", &openai_body(&model, "no_think", false));
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["choices"][0]["message"]["content"], json!(scripted_parts("no_think").1));
    assert!(reply["choices"][0]["message"].get("reasoning_content").is_none(), "{reply}");

    // Ollama, whole and streamed.
    let messages = script()["think"]["messages"].clone();
    let ollama = json!({"model": model, "messages": messages, "stream": false, "options": {"temperature": 0}});
    let (status, reply) = server.post("/api/chat", &ollama);
    assert_eq!(status, 200, "{reply}");
    assert_eq!((&reply["message"]["content"], &reply["message"]["thinking"]), (&json!(answer), &json!(reasoning)));
    let mut streamed = ollama.clone();
    streamed["stream"] = json!(true);
    let (status, lines) = server.stream_lines("/api/chat", &streamed, |_| {});
    assert_eq!(status, 200);
    let (mut thinking, mut content) = (String::new(), String::new());
    for line in &lines {
        let object: Value = serde_json::from_str(line).unwrap();
        thinking.push_str(object["message"]["thinking"].as_str().unwrap_or(""));
        content.push_str(object["message"]["content"].as_str().unwrap_or(""));
    }
    assert_eq!((thinking.as_str(), content.as_str()), (reasoning.as_str(), answer.as_str()));
    let mut off = ollama.clone();
    off["messages"] = script()["no_think"]["messages"].clone();
    off["think"] = json!(false);
    let (status, reply) = server.post("/api/chat", &off);
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["message"]["content"], json!(scripted_parts("no_think").1));
    assert!(reply["message"].get("thinking").is_none(), "{reply}");
    off["think"] = json!("loudly");
    let (status, reply) = server.post("/api/chat", &off);
    assert_eq!(status, 400, "{reply}");

    // The app's own chat: `reasoning` events, and the done event's parts.
    let app_chat = json!({"model_id": model, "messages": messages, "sampling": {"temperature": 0}});
    let done = server.chat_done(&app_chat);
    assert_eq!((&done["text"], &done["reasoning"]), (&json!(answer), &json!(reasoning)), "{done}");
}
