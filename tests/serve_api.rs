//! `cake serve` over real loopback HTTP: the OpenAI-compatible API, the
//! app's commands, fair queuing, cancellation, persistence and bad input.

mod common;

use common::server::{data_dir_with_default_model, Server};
use common::{cake_json, fixture};
use serde_json::{json, Value};
use std::path::Path;

fn start(root: &Path) -> Server {
    let data = data_dir_with_default_model(root);
    Server::start(&data, &root.join("hf-cache"), &[])
}

fn completion(server: &Server, content: &str, extra: Value) -> (u16, Value) {
    let mut body = json!({
        "model": "default",
        "messages": [{"role": "user", "content": content}],
        "temperature": 0,
        "max_tokens": 16,
    });
    body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    server.post("/v1/chat/completions", &body)
}

#[test]
fn models_and_a_non_streaming_completion() {
    let root = tempfile::tempdir().unwrap();
    let server = start(root.path());
    let (status, models) = server.get("/v1/models");
    assert_eq!(status, 200);
    assert_eq!(models["data"][0]["id"], "default");

    // A prompt whose reply outlasts the 16-token budget on every kernel
    // level: a short factual answer ends by itself within it on some (the
    // tiny model's greedy choice flips with the summation order).
    let prompt = "Tell me a long story about a dragon who learns to bake.";
    let (status, reply) = completion(&server, prompt, json!({}));
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["object"], "chat.completion");
    let text = reply["choices"][0]["message"]["content"].as_str().unwrap();
    assert!(!text.is_empty());
    assert_eq!(reply["usage"]["completion_tokens"], 16);
    assert_eq!(reply["choices"][0]["finish_reason"], "length");
    assert!(reply["usage"]["prompt_tokens"].as_u64().unwrap() > 5);
}

#[test]
fn streamed_completion_equals_cake_run_with_the_same_seed() {
    let root = tempfile::tempdir().unwrap();
    let server = start(root.path());
    let body = json!({
        "model": "default", "stream": true, "stream_options": {"include_usage": true},
        "messages": [{"role": "user", "content": "Write a haiku about bread."}],
        "temperature": 0.8, "top_p": 0.95, "seed": 1234, "max_tokens": 24,
    });
    let (status, payloads) = server.stream("/v1/chat/completions", &body, |_, _| true);
    assert_eq!(status, 200);
    assert_eq!(payloads.last().unwrap(), "[DONE]");
    let chunks: Vec<Value> = payloads[..payloads.len() - 1].iter().map(|p| serde_json::from_str(p).unwrap()).collect();
    let streamed: String = chunks.iter().filter_map(|c| c["choices"][0]["delta"]["content"].as_str()).collect();
    assert!(chunks.len() > 5, "the reply arrives in pieces");
    let usage = &chunks.last().unwrap()["usage"];
    assert!((1..=24).contains(&usage["completion_tokens"].as_u64().unwrap()), "{usage}");

    let model = common::server::default_model_file();
    let run = cake_json(&[
        "run",
        "--model",
        model.to_str().unwrap(),
        "--chat",
        "--prompt",
        "Write a haiku about bread.",
        "--temperature",
        "0.8",
        "--top-p",
        "0.95",
        "--seed",
        "1234",
        "--max-tokens",
        "24",
        "--json",
    ]);
    assert_eq!(streamed, run["text"].as_str().unwrap());
}

/// Chats are decoded together while their KV caches fit the context the
/// model was loaded for: two that would outgrow it together start together,
/// one gives way when the caches fill, continues once the other is done,
/// and each replies exactly as it does alone.
#[test]
fn chats_that_would_outgrow_the_context_together_take_turns_and_reply_as_alone() {
    let root = tempfile::tempdir().unwrap();
    let data = data_dir_with_default_model(root.path());
    let server = Server::start(&data, &root.path().join("hf-cache"), &["--ctx", "160"]);
    let chat = |content: &str| {
        let body = json!({
            "model_id": "default", "messages": [{"role": "user", "content": content}],
            "sampling": {"temperature": 0.0}, "max_tokens": 100,
        });
        let done = server.chat_done(&body);
        (done["text"].as_str().unwrap().to_string(), done["stats"]["decoded_together"].as_u64().unwrap_or(1))
    };
    let prompts = ["Tell me a long story about a dragon who learns to bake.", "Tell me a long story about the sea."];
    let alone: Vec<String> = prompts.iter().map(|p| chat(p).0).collect();
    let together: Vec<(String, u64)> = std::thread::scope(|scope| {
        let handles: Vec<_> = prompts.iter().map(|p| scope.spawn(|| chat(p))).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for ((text, _), alone) in together.iter().zip(&alone) {
        assert_eq!(text, alone, "a reply that gave way continues as it would alone");
    }
    assert!(together.iter().any(|(_, n)| *n == 2), "they started together: {together:?}");
}

/// Requests in flight at once are decoded together (through the OpenAI
/// API and the app's), and each replies as it does alone.
#[test]
fn concurrent_requests_are_decoded_together_and_reply_as_one_at_a_time() {
    let root = tempfile::tempdir().unwrap();
    let server = start(root.path());
    let prompts = ["Name three fruits.", "Count from one to five.", "Say hello in French.", "Describe the sea."];
    let budget = json!({"max_tokens": 24});
    let reply_text = |reply: &Value| reply["choices"][0]["message"]["content"].as_str().unwrap().to_string();
    let sequential: Vec<String> =
        prompts.iter().map(|p| reply_text(&completion(&server, p, budget.clone()).1)).collect();
    let concurrent: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> =
            prompts.iter().map(|p| scope.spawn(|| reply_text(&completion(&server, p, budget.clone()).1))).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(concurrent, sequential, "OpenAI requests in flight together");

    let app_chat = |prompt: &str| {
        let body = json!({
            "model_id": "default", "messages": [{"role": "user", "content": prompt}],
            "sampling": {"temperature": 0.0}, "max_tokens": 24,
        });
        let done = server.chat_done(&body);
        (done["text"].as_str().unwrap().to_string(), done["stats"]["decoded_together"].as_u64().unwrap_or(1))
    };
    let together: Vec<(String, u64)> = std::thread::scope(|scope| {
        let handles: Vec<_> = prompts.iter().map(|p| scope.spawn(|| app_chat(p))).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let texts: Vec<String> = together.iter().map(|(text, _)| text.clone()).collect();
    assert_eq!(texts, sequential, "app chats in flight together");
    let most = together.iter().map(|&(_, n)| n).max().unwrap();
    assert!(most >= 2, "four chats sent at once were never decoded together: {together:?}");
}

#[test]
fn bad_requests_get_openai_shaped_errors_and_the_server_keeps_working() {
    let root = tempfile::tempdir().unwrap();
    let server = start(root.path());
    let (status, body) = server.post_raw("/v1/chat/completions", "{not json");
    assert_eq!(status, 400);
    assert_eq!(body["error"]["type"], "invalid_request_error");
    assert!(body["error"]["message"].as_str().unwrap().contains("not valid JSON"));

    let (status, body) = server.post(
        "/v1/chat/completions",
        &json!({"model": "no-such-model", "messages": [{"role": "user", "content": "x"}]}),
    );
    assert_eq!(status, 404);
    assert!(body["error"]["message"].as_str().unwrap().contains("no-such-model"));

    let long = "the lighthouse keeper wrote in his diary every night ".repeat(1200);
    for stream in [false, true] {
        let (status, body) = completion(&server, &long, json!({"stream": stream}));
        assert_eq!(status, 400, "stream = {stream}: {body}");
        assert!(body["error"]["message"].as_str().unwrap().contains("context length"), "{body}");
    }

    let (status, body) = server.post("/v1/chat/completions", &json!({"model": "default", "messages": []}));
    assert_eq!(status, 400, "{body}");

    let (status, reply) = completion(&server, "Hello", json!({"max_tokens": 4}));
    assert_eq!(status, 200, "{reply}");
}

#[test]
fn closing_a_stream_cancels_the_reply() {
    let root = tempfile::tempdir().unwrap();
    let server = start(root.path());
    let body = json!({
        "model_id": "default", "messages": [{"role": "user", "content": "Tell me a very long story."}],
        "sampling": {"temperature": 0.0}, "max_tokens": 2000,
    });
    let (status, payloads) = server.stream("/app/chat", &body, |i, _| i < 3);
    assert_eq!(status, 200);
    assert_eq!(payloads.len(), 4);
    // The engine must be free again long before 2000 tokens could be generated.
    let start = std::time::Instant::now();
    let (status, _) = completion(&server, "Hi", json!({"max_tokens": 2}));
    assert_eq!(status, 200);
    assert!(start.elapsed().as_secs() < 30, "the cancelled reply kept the engine busy");

    // Stopped, then asked again at once (the app's Stop, then Regenerate):
    // the new reply is decoded alone, never beside the stopped one.
    let short = json!({
        "model_id": "default", "messages": [{"role": "user", "content": "Hi"}],
        "sampling": {"temperature": 0.0}, "max_tokens": 4,
    });
    // A long prompt is read in chunks with no token sent: a stop during
    // it is seen only from the closed connection.
    let long_prompt = "Tell me a very long story about bread and cakes. ".repeat(300);
    let reading = json!({
        "model_id": "default", "messages": [{"role": "user", "content": long_prompt}],
        "sampling": {"temperature": 0.0}, "max_tokens": 2000,
    });
    for round in 0..3 {
        let (status, _) = server.stream("/app/chat", &reading, |_, _| false);
        assert_eq!(status, 200);
        let (status, payloads) = server.stream("/app/chat", &short, |_, _| true);
        assert_eq!(status, 200);
        let done: Value = serde_json::from_str(payloads.last().unwrap()).unwrap();
        assert_eq!(done["type"], "done", "{done}");
        assert_eq!(done["stats"].get("decoded_together"), None, "round {round}: shared a step: {done}");
    }
}

#[test]
fn app_chat_streams_tokens_then_stats() {
    let root = tempfile::tempdir().unwrap();
    let server = start(root.path());
    let body = json!({
        "model_id": "default", "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi!"}],
        "sampling": {"temperature": 0.0}, "max_tokens": 12,
    });
    let (status, payloads) = server.stream("/app/chat", &body, |_, _| true);
    assert_eq!(status, 200);
    let events: Vec<Value> = payloads.iter().map(|p| serde_json::from_str(p).unwrap()).collect();
    let tokens = events.iter().filter(|e| e["type"] == "token").count();
    assert!(tokens >= 2, "{events:?}");
    let done = events.last().unwrap();
    assert_eq!(done["type"], "done");
    assert!(done["stats"]["decode_tok_s"].as_f64().unwrap() > 0.0);
    assert!(done["stats"]["ttft_s"].as_f64().unwrap() > 0.0);
}

#[test]
fn conversations_survive_a_restart() {
    let root = tempfile::tempdir().unwrap();
    let conversation = json!({
        "id": "conv_1", "title": "Bread", "model_id": "default", "system_prompt": "",
        "sampling": {}, "messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}],
        "created_at": "2026-11-30T10:00:00Z", "updated_at": "2026-11-30T10:00:01Z",
    });
    {
        let server = start(root.path());
        let (status, _) = server.post("/app/save_conversation", &json!({"conversation": conversation}));
        assert_eq!(status, 200);
    }
    let server = Server::start(&root.path().join("data"), &root.path().join("hf-cache"), &[]);
    let (_, list) = server.post("/app/list_conversations", &json!({}));
    assert_eq!(list["conversations"][0]["id"], "conv_1");
    let (_, got) = server.post("/app/get_conversation", &json!({"id": "conv_1"}));
    assert_eq!(got, conversation);
    let (status, body) = server.post("/app/get_conversation", &json!({"id": "../../etc/passwd"}));
    assert_eq!(status, 400, "{body}");
}

#[test]
fn importing_bad_files_is_refused_with_the_reason() {
    let root = tempfile::tempdir().unwrap();
    let server = start(root.path());
    let not_a_model = root.path().join("notes.txt");
    std::fs::write(&not_a_model, "just some text, not a model").unwrap();
    let truncated = root.path().join("truncated.gguf");
    let bytes = std::fs::read(common::server::default_model_file()).unwrap();
    std::fs::write(&truncated, &bytes[..4096]).unwrap();
    let empty = root.path().join("empty-folder");
    std::fs::create_dir(&empty).unwrap();
    for (path, reason) in [(&not_a_model, "not a GGUF"), (&truncated, "truncated"), (&empty, "no config.json")] {
        let (status, body) = server.post("/app/import_model", &json!({"path": path}));
        assert_eq!(status, 400, "{body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(reason) && message.contains("is not a model"), "{message}");
    }
    // A real model folder imports, shows up, and chats.
    let tiny = fixture("tiny/qwen2");
    let (status, entry) = server.post("/app/import_model", &json!({"path": tiny}));
    assert_eq!(status, 200, "{entry}");
    assert_eq!(entry["architecture"], "qwen2");
    assert_eq!(entry["status"], "complete");
    let (_, list) = server.post("/app/list_models", &json!({}));
    assert_eq!(list["models"].as_array().unwrap().len(), 2);
    let (status, reply) = server.post(
        "/v1/chat/completions",
        &json!({"model": entry["id"], "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}),
    );
    assert_eq!(status, 200, "{reply}");
    let (status, _) = server.post("/app/delete_model", &json!({"id": entry["id"]}));
    assert_eq!(status, 200);
    assert!(tiny.join("config.json").exists(), "forgetting an import keeps its files");
}

/// The app's pictures over HTTP: kept under their SHA-256 with a
/// thumbnail; a bomb's header, a file that is not a picture, a bad id and
/// a picture no longer kept are client errors naming the problem.
#[test]
fn pictures_are_kept_by_digest_and_bad_ones_refused() {
    use base64::Engine;
    use sha2::Digest;
    let root = tempfile::tempdir().unwrap();
    let server = start(root.path());
    let encode = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
    let mut png = Vec::new();
    let pixels = image::RgbImage::from_fn(500, 250, |x, y| image::Rgb([x as u8, y as u8, 90]));
    pixels.write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png).unwrap();
    let (status, kept) =
        server.post("/app/add_picture", &json!({"file_base64": encode(&png), "file_name": "stripes.png"}));
    assert_eq!(status, 200, "{kept}");
    let id = kept["id"].as_str().unwrap().to_string();
    assert_eq!(id, format!("{:x}", sha2::Sha256::digest(&png)));
    assert_eq!((kept["width"].as_u64(), kept["height"].as_u64()), (Some(500), Some(250)));
    let (status, thumbnail) = server.post("/app/picture_thumbnail", &json!({"id": id}));
    assert_eq!(status, 200, "{thumbnail}");
    let jpeg = base64::engine::general_purpose::STANDARD.decode(thumbnail["jpeg_base64"].as_str().unwrap()).unwrap();
    let small = image::load_from_memory_with_format(&jpeg, image::ImageFormat::Jpeg).unwrap();
    assert_eq!((small.width(), small.height()), (320, 160));

    let refusal = |path: &str, body: Value| {
        let (status, answer) = server.post(path, &body);
        (status, answer["error"]["message"].as_str().unwrap_or_default().to_string())
    };
    let bomb = json!({"file_base64": encode(&common::png_header(30_000, 30_000)), "file_name": "huge.png"});
    let (status, message) = refusal("/app/add_picture", bomb);
    assert_eq!(status, 400);
    assert!(message.starts_with("huge.png: the picture is 30000 × 30000 pixels"), "{message}");
    let (status, message) =
        refusal("/app/add_picture", json!({"file_base64": encode(b"plain text"), "file_name": "a.txt"}));
    assert_eq!((status, message.as_str()), (400, "a.txt: not a PNG, JPEG, WebP or GIF picture"));
    let (status, message) = refusal("/app/picture_thumbnail", json!({"id": "../../etc/passwd"}));
    assert_eq!(status, 400);
    assert!(message.contains("is not a picture id"), "{message}");
    let (status, _) = refusal("/app/picture_thumbnail", json!({"id": "0".repeat(64)}));
    assert_eq!(status, 404);
    let gone =
        json!({"model_id": "default", "messages": [{"role": "user", "content": "?", "pictures": ["0".repeat(64)]}]});
    let (status, message) = refusal("/app/chat", gone);
    assert_eq!(status, 400);
    assert!(message.contains("is not kept any more"), "{message}");
}

#[test]
fn unknown_commands_and_bad_arguments_are_client_errors() {
    let root = tempfile::tempdir().unwrap();
    let server = start(root.path());
    let (status, _) = server.post("/app/no_such_command", &json!({}));
    assert_eq!(status, 404);
    let (status, body) = server.post("/app/get_conversation", &json!({"wrong": 1}));
    assert_eq!(status, 400);
    assert!(body["error"]["message"].as_str().unwrap().contains("invalid arguments"));
    let (status, body) =
        server.post("/app/chat", &json!({"model_id": "default", "messages": [{"role": "wizard", "content": "x"}]}));
    assert_eq!(status, 400);
    assert!(body["error"]["message"].as_str().unwrap().contains("wizard"));
}

/// The reply of a fresh `cake run` (no cache) to `messages` through the
/// default model's own chat template, 16 tokens at temperature 0.
fn fresh_run(messages: &[Value]) -> String {
    use cake::text::chat_template::ChatMessage;
    use cake::text::model::{LoadOptions, TextModel};
    let model_file = common::server::default_model_file();
    let model = TextModel::load(&model_file, &LoadOptions::default()).unwrap();
    let (template, tokenizer) = (model.chat_template().unwrap(), model.tokenizer().unwrap());
    let history: Vec<ChatMessage> = messages
        .iter()
        .map(|m| ChatMessage::new(m["role"].as_str().unwrap(), m["content"].as_str().unwrap()))
        .collect();
    let ids = tokenizer.encode(&template.render(&history, true).unwrap(), false).unwrap();
    let ids = ids.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
    let run = cake_json(&[
        "run",
        "--model",
        model_file.to_str().unwrap(),
        "--prompt-tokens",
        &ids,
        "--temperature",
        "0",
        "--max-tokens",
        "16",
        "--json",
    ]);
    run["text"].as_str().unwrap().to_string()
}

/// An OpenAI client resending the history every turn: later turns read
/// only their new tokens (the usage says how many came from the cache),
/// and every reply equals a fresh `cake run` on the same prompt tokens.
#[test]
fn a_conversation_resent_each_turn_reads_only_its_new_tokens_and_replies_as_fresh_runs() {
    let root = tempfile::tempdir().unwrap();
    let converse = |server: &Server| {
        let mut messages: Vec<Value> = vec![json!({"role": "system", "content": "You answer in one short sentence."})];
        let mut turns = Vec::new();
        for question in ["What is bread made of?", "And butter?", "Which one is older?", "Thanks! One more: cheese?"] {
            messages.push(json!({"role": "user", "content": question}));
            let body = json!({"model": "default", "messages": messages, "temperature": 0, "max_tokens": 16});
            let (status, reply) = server.post("/v1/chat/completions", &body);
            assert_eq!(status, 200, "{reply}");
            let text = reply["choices"][0]["message"]["content"].as_str().unwrap().to_string();
            assert_eq!(text, fresh_run(&messages), "turn {}: the reply equals a fresh run", turns.len());
            let usage = &reply["usage"];
            turns.push((
                text.clone(),
                usage["prompt_tokens_details"]["cached_tokens"].as_u64().unwrap(),
                usage["prompt_tokens"].as_u64().unwrap(),
            ));
            messages.push(json!({"role": "assistant", "content": text}));
        }
        turns
    };
    let first = converse(&start(root.path()));
    assert_eq!(first[0].1, 0, "nothing to reuse on the first turn");
    for turn in 1..first.len() {
        let ((_, reused, prompt), previous_prompt) = (&first[turn], first[turn - 1].2);
        assert!(
            *reused >= previous_prompt && reused < prompt,
            "turn {turn}: {reused} of {prompt} prompt tokens from the cache, the last prompt had {previous_prompt}"
        );
    }
}

/// Conversations that share a system prompt, started one after another
/// or together, each read only what follows the shared start (copied from
/// the last request's cache, which stays for the next) and reply as
/// fresh runs.
#[test]
fn conversations_sharing_a_system_prompt_skip_it_and_reply_as_fresh_runs() {
    let root = tempfile::tempdir().unwrap();
    let server = start(root.path());
    let system = json!({"role": "system", "content": "You are a careful assistant who answers in one short sentence."});
    let ask = |question: &str| {
        let messages = vec![system.clone(), json!({"role": "user", "content": question})];
        let body = json!({"model": "default", "messages": messages, "temperature": 0, "max_tokens": 16});
        let (status, reply) = server.post("/v1/chat/completions", &body);
        assert_eq!(status, 200, "{reply}");
        let usage = &reply["usage"];
        let text = reply["choices"][0]["message"]["content"].as_str().unwrap().to_string();
        let cached = usage["prompt_tokens_details"]["cached_tokens"].as_u64().unwrap();
        (messages, text, cached, usage["prompt_tokens"].as_u64().unwrap())
    };
    // A longer question than the later ones: a prompt that shares more
    // than half of the cached tokens is taken as the same conversation.
    let first = ask("What is bread made of, and how did bakers in different countries make it long ago?");
    assert_eq!(first.2, 0, "nothing cached before the first request");
    let questions = ["Why is the sky blue?", "Name a large river.", "What do bees make?"];
    let later: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = questions.iter().map(|q| scope.spawn(move || ask(q))).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (messages, text, cached, prompt) in std::iter::once(first).chain(later).skip(1) {
        // The system turn alone is more than 12 tokens of the template.
        assert!((12..prompt).contains(&cached), "{cached} of {prompt} prompt tokens from the cache");
        assert_eq!(text, fresh_run(&messages), "the reply to {messages:?}");
    }
}

/// A model opened with `--model PATH` is listed by its file name, which a
/// client can send back as `model`, not as `file:/absolute/path`.
#[test]
fn a_model_opened_by_path_is_listed_and_used_by_its_file_name() {
    let root = tempfile::tempdir().unwrap();
    let data = data_dir_with_default_model(root.path());
    let gguf = root.path().join("SmolLM2-copy.Q4_1.gguf");
    // A copy: an import follows links to the file they name.
    std::fs::copy(data.join("models/SmolLM2-135M-Instruct.Q4_1.gguf"), &gguf).unwrap();
    let server = Server::start(&data, &root.path().join("hf-cache"), &["--model", gguf.to_str().unwrap()]);
    let (status, models) = server.get("/v1/models");
    assert_eq!(status, 200);
    let ids: Vec<&str> = models["data"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["default", "SmolLM2-copy.Q4_1.gguf"]);
    let (status, reply) = server.post(
        "/v1/chat/completions",
        &json!({"model": "SmolLM2-copy.Q4_1.gguf", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}),
    );
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["model"], "SmolLM2-copy.Q4_1.gguf");
}

#[test]
fn ollama_chat_drops_the_oldest_turns_of_a_conversation_too_long_and_says_so() {
    let root = tempfile::tempdir().unwrap();
    let server = start(root.path());
    let long = "Tell me everything about sourdough starters, their feeding and their smell. ".repeat(3);
    let mut messages = vec![json!({"role": "system", "content": "Be brief."})];
    for _ in 0..4 {
        messages.push(json!({"role": "user", "content": long}));
        messages.push(json!({"role": "assistant", "content": long}));
    }
    messages.push(json!({"role": "user", "content": "Hi"}));
    let body = json!({"model": "default", "messages": messages, "stream": false,
                      "options": {"num_ctx": 160, "num_predict": 4, "temperature": 0}});
    let (status, reply) = server.post("/api/chat", &body);
    assert_eq!(status, 200, "{reply}");
    assert!(reply["truncated_messages"].as_u64().unwrap() >= 2, "{reply}");
    assert!(reply["prompt_eval_count"].as_u64().unwrap() <= 160, "{reply}");
}

#[test]
fn replies_cut_by_the_token_budget_never_end_in_a_broken_character() {
    let root = tempfile::tempdir().unwrap();
    let server = start(root.path());
    let ask = "Reply with only emoji: 🍰🎂🍓🍫 and more emoji";
    for seed in 0..3 {
        let extra = json!({"max_tokens": 8, "seed": seed, "temperature": 1.0});
        let (status, reply) = completion(&server, ask, extra.clone());
        assert_eq!(status, 200, "{reply}");
        let text = reply["choices"][0]["message"]["content"].as_str().unwrap();
        assert!(!text.contains('\u{FFFD}'), "seed {seed}: {text:?}");
        let mut body = json!({"model": "default", "messages": [{"role": "user", "content": ask}], "stream": true});
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        let (_, payloads) = server.stream("/v1/chat/completions", &body, |_, _| true);
        let streamed: String = payloads
            .iter()
            .filter_map(|p| serde_json::from_str::<Value>(p).ok())
            .filter_map(|chunk| chunk["choices"][0]["delta"]["content"].as_str().map(str::to_string))
            .collect();
        assert_eq!(streamed, text, "seed {seed}: streamed and whole agree");
    }
}
