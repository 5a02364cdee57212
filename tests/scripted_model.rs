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

const CONVERSATIONS: [&str; 6] =
    ["think", "no_think", "think_alone", "tool_call", "tool_result", "tool_result_thought"];

#[test]
fn prompts_render_and_tokenize_as_transformers_and_greedy_replies_follow_the_script() {
    let model = TextModel::load(&fixture("tiny/qwen3_scripted"), &LoadOptions::default()).unwrap();
    let (template, tokenizer) = (model.chat_template().unwrap(), model.tokenizer().unwrap());
    assert!(template.thinks());
    let script = script();
    for name in CONVERSATIONS {
        let case = &script[name];
        let messages: Vec<ChatMessage> = serde_json::from_value(case["messages"].clone()).unwrap();
        let tools = case["tools"].as_array().cloned();
        let options = RenderOptions { enable_thinking: case["enable_thinking"].as_bool(), tools };
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

/// The weather tool the script offers, and the call it makes.
fn weather_tools() -> Value {
    script()["tool_call"]["tools"].clone()
}

#[test]
fn tool_calls_come_back_as_calls_and_their_results_are_answered() {
    let root = tempfile::tempdir().unwrap();
    let (server, model) = serve(root.path());
    let script = script();
    let (reasoning, _) = scripted_parts("tool_call");
    let ask = |name: &str, extra: Value| {
        let mut body = json!({"model": model, "messages": script[name]["messages"], "temperature": 0});
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        body
    };

    // Whole: the call, parsed, with no call syntax left in the content.
    let (status, reply) = server.post("/v1/chat/completions", &ask("tool_call", json!({"tools": weather_tools()})));
    assert_eq!(status, 200, "{reply}");
    let choice = &reply["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls", "{reply}");
    assert_eq!(choice["message"]["content"], Value::Null, "{reply}");
    assert_eq!(choice["message"]["reasoning_content"], json!(reasoning));
    let call = &choice["message"]["tool_calls"][0];
    assert_eq!((&call["type"], &call["function"]["name"]), (&json!("function"), &json!("get_weather")));
    let arguments: Value = serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(arguments, json!({"city": "Paris"}));
    assert_eq!(call["id"].as_str().unwrap().len(), 9);
    assert_eq!(choice["message"]["tool_calls"].as_array().unwrap().len(), 1);

    // Streamed: one tool_calls delta with an index, then the finish.
    let body = ask("tool_call", json!({"tools": weather_tools(), "stream": true}));
    let (status, payloads) = server.stream("/v1/chat/completions", &body, |_, _| true);
    assert_eq!(status, 200);
    let chunks: Vec<Value> =
        payloads.iter().filter(|p| *p != "[DONE]").map(|p| serde_json::from_str(p).unwrap()).collect();
    let content: String = chunks.iter().filter_map(|c| c["choices"][0]["delta"]["content"].as_str()).collect();
    assert_eq!(content, "", "no call syntax in the content: {payloads:?}");
    let deltas: Vec<&Value> = chunks.iter().filter_map(|c| c["choices"][0]["delta"].get("tool_calls")).collect();
    assert_eq!(deltas.len(), 1, "{payloads:?}");
    assert_eq!((&deltas[0][0]["index"], &deltas[0][0]["function"]["name"]), (&json!(0), &json!("get_weather")));
    assert_eq!(chunks.last().unwrap()["choices"][0]["finish_reason"], "tool_calls");

    // The result sent back (as the client got the call): the answer.
    let (status, reply) = server.post("/v1/chat/completions", &ask("tool_result", json!({"tools": weather_tools()})));
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["choices"][0]["message"]["content"], json!(scripted_parts("tool_result").1));
    assert_eq!(reply["choices"][0]["finish_reason"], "stop");
    assert!(reply["choices"][0]["message"].get("tool_calls").is_none());

    // `tool_choice: none` offers no tools: the model, never shown them, writes
    // text, and nothing is read as a call.
    let (status, reply) = server
        .post("/v1/chat/completions", &ask("tool_call", json!({"tools": weather_tools(), "tool_choice": "none"})));
    assert_eq!(status, 200, "{reply}");
    assert!(reply["choices"][0]["message"].get("tool_calls").is_none(), "{reply}");

    // Ollama's chat: the call with its arguments as an object, then the answer.
    let messages = script["tool_call"]["messages"].clone();
    let ollama = json!({"model": model, "messages": messages, "tools": weather_tools(), "stream": false,
                        "options": {"temperature": 0}});
    let (status, reply) = server.post("/api/chat", &ollama);
    assert_eq!(status, 200, "{reply}");
    assert_eq!(
        reply["message"]["tool_calls"],
        json!([{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}])
    );
    assert_eq!(reply["message"]["content"], "");
    let mut follow_up = ollama.clone();
    let turns = follow_up["messages"].as_array_mut().unwrap();
    turns.push(json!({"role": "assistant", "content": "", "tool_calls": reply["message"]["tool_calls"]}));
    turns.push(json!({"role": "tool", "content": "{\"temperature\": 21}"}));
    let (status, reply) = server.post("/api/chat", &follow_up);
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["message"]["content"], json!(scripted_parts("tool_result").1));

    // A call forced where the model would not call (a sum): `required` and
    // named, each a call valid under the tool's schema.
    for choice in [json!("required"), json!({"type": "function", "function": {"name": "get_weather"}})] {
        let (status, reply) = server
            .post("/v1/chat/completions", &ask("think", json!({"tools": weather_tools(), "tool_choice": choice})));
        assert_eq!(status, 200, "{reply}");
        let choice = &reply["choices"][0];
        assert_eq!(choice["finish_reason"], "tool_calls", "{reply}");
        let call = &choice["message"]["tool_calls"][0]["function"];
        assert_eq!(call["name"], "get_weather", "{reply}");
        let arguments: Value = serde_json::from_str(call["arguments"].as_str().unwrap()).unwrap();
        assert!(arguments["city"].is_string(), "{reply}");
        assert_eq!(arguments.as_object().unwrap().len(), 1, "{reply}");
    }

    // Bad tools and choices are refused, naming why.
    let unknown = json!({"type": "function", "function": {"name": "get_time"}});
    for (extra, says) in [
        (json!({"tools": [{"type": "retrieval"}]}), "only `function` tools"),
        (json!({"tools": [{"type": "function", "function": {"name": "no spaces"}}]}), "function.name"),
        (json!({"tools": weather_tools(), "tool_choice": unknown}), "not among the tools"),
        (json!({"tool_choice": "required"}), "no `tools`"),
    ] {
        let (status, reply) = server.post("/v1/chat/completions", &ask("tool_call", extra));
        assert_eq!(status, 400, "{reply}");
        assert!(reply["error"]["message"].as_str().unwrap().contains(says), "{reply}");
    }
}

/// Floats of a JSON list.
fn floats(value: &Value) -> Vec<f64> {
    value.as_array().expect("list").iter().map(|v| v.as_f64().expect("number")).collect()
}

#[test]
fn log_probabilities_equal_transformers_on_both_openai_routes() {
    let root = tempfile::tempdir().unwrap();
    let (server, model) = serve(root.path());
    let case = &script()["think"];
    // The reply's tokens but its end-of-turn, which is not written.
    let expected = floats(&case["reply_logprobs"]);
    let expected = &expected[..expected.len() - 1];
    let close = |ours: &[f64], what: &str| {
        assert_eq!(ours.len(), expected.len(), "{what}: {ours:?}");
        for (i, (a, b)) in ours.iter().zip(expected).enumerate() {
            assert!((a - b).abs() < 1e-3, "{what}: token {i}: cake {a}, transformers {b}");
        }
    };

    let mut body = openai_body(&model, "think", false);
    body["logprobs"] = json!(true);
    body["top_logprobs"] = json!(3);
    let (status, reply) = server.post("/v1/chat/completions", &body);
    assert_eq!(status, 200, "{reply}");
    let content = reply["choices"][0]["logprobs"]["content"].as_array().unwrap();
    close(&content.iter().map(|e| e["logprob"].as_f64().unwrap()).collect::<Vec<_>>(), "chat");
    for entry in content {
        // Greedy: the token written is the likeliest, and its bytes spell it.
        assert_eq!(entry["top_logprobs"].as_array().unwrap().len(), 3);
        assert_eq!(entry["top_logprobs"][0]["token"], entry["token"], "{entry}");
        let bytes: Vec<u8> = entry["bytes"].as_array().unwrap().iter().map(|b| b.as_u64().unwrap() as u8).collect();
        assert_eq!(String::from_utf8_lossy(&bytes), entry["token"].as_str().unwrap());
    }
    let written: String = content.iter().map(|e| e["token"].as_str().unwrap()).collect();
    assert_eq!(written, case["reply"].as_str().unwrap(), "the tokens spell the whole reply, reasoning included");

    let completion = json!({"model": model, "prompt": case["prompt"], "temperature": 0, "max_tokens": 64,
                            "logprobs": 2});
    let (status, reply) = server.post("/v1/completions", &completion);
    assert_eq!(status, 200, "{reply}");
    let logprobs = &reply["choices"][0]["logprobs"];
    close(&floats(&logprobs["token_logprobs"]), "completions");
    assert_eq!(logprobs["top_logprobs"][0].as_object().unwrap().len(), 2);
    let (status, reply) = server.post(
        "/v1/chat/completions",
        &json!({"model": model, "messages": case["messages"],
        "top_logprobs": 2}),
    );
    assert_eq!(status, 400, "{reply}");
}
