//! Real chat templates of published checkpoints render in Cake exactly as
//! transformers renders them (`apply_chat_template`'s renderer) on a fixed
//! set of conversations, refusals included.
//!
//! `tests/fixtures/generate_chat_template_references.py` copied the
//! templates (llama.cpp's `models/templates/`) and wrote transformers'
//! renders to `tests/fixtures/chat_templates/reference.json`.

mod common;

use cake::text::chat_template::{ChatMessage, ChatTemplate, RenderOptions};
use cake::text::tool_calls::{ToolCall, ToolCallSplitter};
use common::fixture;
use serde_json::Value;

/// `text` with today's date where the reference has its markers: the
/// dates templates print with `strftime_now` (Llama 3.x's `%d %b %Y`,
/// Mistral Small 3.x's `%Y-%m-%d`).
fn with_today(reference: &Value, text: &str) -> String {
    let now = chrono::Local::now();
    text.replace(reference["today"].as_str().unwrap(), &now.format("%d %b %Y").to_string())
        .replace(reference["today_iso"].as_str().unwrap(), &now.format("%Y-%m-%d").to_string())
}

#[test]
fn every_template_renders_every_conversation_as_transformers_does() {
    let reference: Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("chat_templates/reference.json")).expect("reference.json"),
    )
    .expect("valid JSON");
    let cases = reference["cases"].as_array().unwrap();
    let mut wrong = Vec::new();
    for case in cases {
        let name = case["template"].as_str().unwrap();
        let source = std::fs::read_to_string(fixture(&format!("chat_templates/{name}"))).unwrap();
        let template =
            ChatTemplate::new(Some(&source), case["bos_token"].as_str(), case["eos_token"].as_str()).unwrap();
        let messages: Vec<ChatMessage> = serde_json::from_value(case["messages"].clone()).unwrap();
        let add_generation_prompt = case["add_generation_prompt"].as_bool().unwrap();
        let options = RenderOptions { tools: case["tools"].as_array().cloned(), ..Default::default() };
        let what = format!("{name} / {} / generation prompt {add_generation_prompt}", case["conversation"]);
        let rendered = template.render_with(&messages, add_generation_prompt, &options);
        match (rendered, case.get("text"), case.get("error")) {
            (Ok(text), Some(expected), _) => {
                let expected = with_today(&reference, expected.as_str().unwrap());
                if text != expected {
                    wrong.push(format!("{what}:\n  transformers {expected:?}\n  cake         {text:?}"));
                }
            }
            (Err(e), _, Some(expected)) => {
                let message = format!("{e:#}");
                if !message.contains(expected.as_str().unwrap()) {
                    wrong.push(format!("{what}: refused with {message:?}, transformers with {expected}"));
                }
            }
            (Ok(_), None, None) => panic!("{what}: the reference has neither text nor error"),
            (Ok(text), _, Some(expected)) => {
                wrong.push(format!("{what}: rendered {text:?}, transformers refused: {expected}"))
            }
            (Err(e), _, _) => wrong.push(format!("{what}: refused ({e:#}), transformers rendered it")),
        }
    }
    assert!(cases.len() >= 100, "the reference holds {} renders", cases.len());
    assert!(wrong.is_empty(), "{} of {} renders differ:\n{}", wrong.len(), cases.len(), wrong.join("\n"));
}

/// Gemma files without a template (base models) get Gemma's turns: on every
/// conversation Gemma 2's real template accepts, the same text as
/// transformers renders with it.
#[test]
fn gemma_fallback_renders_as_gemmas_own_template() {
    use cake::text::chat_template::{fallback_template, GEMMA_TURNS};
    let gemma_vocab = ["<start_of_turn>", "<end_of_turn>"];
    assert_eq!(fallback_template(|t| gemma_vocab.contains(&t)), GEMMA_TURNS);
    let reference: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("chat_templates/reference.json")).unwrap()).unwrap();
    let fallback = ChatTemplate::new(Some(GEMMA_TURNS), Some("<bos>"), Some("<eos>")).unwrap();
    let mut compared = 0;
    for case in reference["cases"].as_array().unwrap() {
        let (Some(expected), "google-gemma-2-2b-it.jinja") =
            (case["text"].as_str(), case["template"].as_str().unwrap())
        else {
            continue;
        };
        let messages: Vec<ChatMessage> = serde_json::from_value(case["messages"].clone()).unwrap();
        let rendered = fallback.render(&messages, case["add_generation_prompt"].as_bool().unwrap()).unwrap();
        assert_eq!(rendered, expected, "{}", case["conversation"]);
        compared += 1;
    }
    assert!(compared >= 6, "compared {compared} renders");
    // A system prompt, which Gemma's templates fold into the first user turn.
    let with_system = [ChatMessage::new("system", "Be brief."), ChatMessage::new("user", "Hi")];
    assert_eq!(
        fallback.render(&with_system, true).unwrap(),
        "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\n"
    );
}

/// Where a rendered turn ends.
const END_OF_TURN: [&str; 7] =
    ["<|im_end|>", "<|eot_id|>", "</s>", "<｜tool▁calls▁end｜>", "<｜end▁of▁sentence｜>", "<end_of_turn>", "<|end|>"];

/// Every template that renders an earlier call renders it in the syntax
/// Cake reads back from that model's replies: the assistant's turn, as a
/// reply would stream it, parses into the call the conversation holds.
#[test]
fn calls_rendered_by_each_template_read_back_as_the_same_calls() {
    let reference: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("chat_templates/reference.json")).unwrap()).unwrap();
    let cases = reference["cases"].as_array().unwrap();
    let mut read = Vec::new();
    for case in cases.iter().filter(|c| c["conversation"] == "tool_call" && c["add_generation_prompt"] == false) {
        let name = case["template"].as_str().unwrap();
        let Some(text) = case["text"].as_str().filter(|_| name != "tojson.jinja") else { continue };
        let source = std::fs::read_to_string(fixture(&format!("chat_templates/{name}"))).unwrap();
        let template =
            ChatTemplate::new(Some(&source), case["bos_token"].as_str(), case["eos_token"].as_str()).unwrap();
        let messages: Vec<ChatMessage> = serde_json::from_value(case["messages"].clone()).unwrap();
        let options = RenderOptions { tools: case["tools"].as_array().cloned(), ..Default::default() };
        // The reply: what the call adds after the question's generation prompt.
        let prompt = template.render_with(&messages[..1], true, &options).unwrap();
        let text = with_today(&reference, text);
        // A generation prompt may hold a reasoning block the rendered turn has not (DeepSeek-R1).
        let opened = prompt.rfind("<think>").map_or(prompt.as_str(), |at| &prompt[..at]);
        let Some(reply) = text.strip_prefix(prompt.as_str()).or_else(|| text.strip_prefix(opened)) else {
            panic!("{name}: the call's render does not start with the question's: {text:?}")
        };
        let reply = reply.split_once("</think>").map_or(reply, |(_, answer)| answer);
        let reply = END_OF_TURN.iter().fold(reply, |r, end| r.split(end).next().unwrap());
        if reply.trim().is_empty() {
            continue; // the template does not render calls (Gemma 2, Phi-3.5, SmolLM3)
        }
        let mut splitter =
            ToolCallSplitter::new(template.tool_call_syntax(), case["tools"].as_array().unwrap().clone());
        let shown: String = reply.chars().map(|c| splitter.push(&c.to_string())).collect();
        let end = splitter.finish();
        let expected =
            ToolCall { name: "get_weather".into(), arguments: serde_json::json!({"city": "Paris", "days": 3}) };
        assert_eq!((shown.trim(), end.calls.as_slice()), ("", [expected].as_slice()), "{name}: {reply:?}");
        read.push(name);
    }
    read.sort();
    assert_eq!(
        read,
        [
            "Mistral-Small-3.2-24B-Instruct-2506.jinja",
            "Qwen-Qwen2.5-7B-Instruct.jinja",
            "Qwen-Qwen3-0.6B.jinja",
            "Qwen3.5-4B.jinja",
            "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja",
            "meta-llama-Llama-3.1-8B-Instruct.jinja",
            "meta-llama-Llama-3.2-3B-Instruct.jinja",
            "mistralai-Mistral-Nemo-Instruct-2407.jinja",
        ]
    );
}

/// Every real template takes a conversation with a tool, a call and its
/// result: what it does not render itself (Gemma 2, Phi-3.5 and SmolLM3
/// render no tools, calls or `tool` turns; the DeepSeek-R1 distills no
/// tools) is written into turns it keeps, so the prompt offers the tool,
/// holds the call as the model's replies write it and the result.
#[test]
fn every_template_takes_tools_calls_and_results() {
    let reference: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("chat_templates/reference.json")).unwrap()).unwrap();
    let cases = reference["cases"].as_array().unwrap();
    let mut described = Vec::new();
    for case in cases.iter().filter(|c| c["conversation"] == "tool_result" && c["add_generation_prompt"] == true) {
        let name = case["template"].as_str().unwrap();
        if name == "tojson.jinja" {
            continue;
        }
        let source = std::fs::read_to_string(fixture(&format!("chat_templates/{name}"))).unwrap();
        let template =
            ChatTemplate::new(Some(&source), case["bos_token"].as_str(), case["eos_token"].as_str()).unwrap();
        let messages: Vec<ChatMessage> = serde_json::from_value(case["messages"].clone()).unwrap();
        let tools = case["tools"].as_array().unwrap().clone();
        let options = RenderOptions { tools: Some(tools.clone()), ..Default::default() };
        let prompt = template.render_prompt(&messages, &options).unwrap_or_else(|e| panic!("{name}: {e:#}"));
        assert!(prompt.contains("The current weather in a city."), "{name}: the tool is missing: {prompt}");
        assert!(prompt.contains("temperature") && prompt.contains("21"), "{name}: the result is missing: {prompt}");
        if prompt.contains("You can call these functions") {
            // The call, rendered by the template (the read-back test above
            // covers those) or written by Cake in the syntax replies use.
            let call =
                ToolCall { name: "get_weather".into(), arguments: serde_json::json!({"city": "Paris", "days": 3}) };
            let written = template.tool_call_syntax().write(&[call]);
            let rendered_by_template = source.contains("tool_calls");
            assert!(rendered_by_template || prompt.contains(&written), "{name}: the call is missing: {prompt}");
            described.push(name);
        }
    }
    described.sort();
    assert_eq!(
        described,
        [
            "HuggingFaceTB-SmolLM3-3B.jinja",
            "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja",
            "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja",
            "google-gemma-2-2b-it.jinja",
            "microsoft-Phi-3.5-mini-instruct.jinja",
        ]
    );
}
