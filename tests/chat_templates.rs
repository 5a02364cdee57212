//! Real chat templates of published checkpoints render in Cake exactly as
//! transformers renders them (`apply_chat_template`'s renderer) on a fixed
//! set of conversations, refusals included.
//!
//! `tests/fixtures/generate_chat_template_references.py` copied the
//! templates (llama.cpp's `models/templates/`) and wrote transformers'
//! renders to `tests/fixtures/chat_templates/reference.json`.

mod common;

use cake::text::chat_template::{ChatMessage, ChatTemplate};
use common::fixture;
use serde_json::Value;

#[test]
fn every_template_renders_every_conversation_as_transformers_does() {
    let reference: Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("chat_templates/reference.json")).expect("reference.json"),
    )
    .expect("valid JSON");
    // The date Llama 3.x templates print (strftime_now), where the reference has a marker.
    let today = chrono::Local::now().format("%d %b %Y").to_string();
    let marker = reference["today"].as_str().unwrap();
    let cases = reference["cases"].as_array().unwrap();
    let mut wrong = Vec::new();
    for case in cases {
        let name = case["template"].as_str().unwrap();
        let source = std::fs::read_to_string(fixture(&format!("chat_templates/{name}"))).unwrap();
        let template =
            ChatTemplate::new(Some(&source), case["bos_token"].as_str(), case["eos_token"].as_str()).unwrap();
        let messages: Vec<ChatMessage> = serde_json::from_value(case["messages"].clone()).unwrap();
        let add_generation_prompt = case["add_generation_prompt"].as_bool().unwrap();
        let what = format!("{name} / {} / generation prompt {add_generation_prompt}", case["conversation"]);
        match (template.render(&messages, add_generation_prompt), case.get("text"), case.get("error")) {
            (Ok(text), Some(expected), _) => {
                let expected = expected.as_str().unwrap().replace(marker, &today);
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
