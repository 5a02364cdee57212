//! A conversation with tools, shaped for what the model's template renders.
//!
//! Templates differ in what they do with tools: most take the `tools`
//! argument (Qwen, Llama 3.x, Mistral), Phi-4-mini reads them from the
//! system message's `tools` field, and many render none at all (Gemma,
//! Phi-3.5, the DeepSeek-R1 distills), nor earlier calls or the `tool`
//! role. Rendered as they are, such conversations would lose the tools
//! silently or be refused. [`ToolSupport`] reads what a template renders;
//! [`shape_conversation`] writes the rest into the turns the template does
//! render: the tools and how to call them into the system prompt, calls
//! into the assistant's text in the syntax Cake reads back, results into
//! user turns.

use super::chat_template::ChatMessage;
use super::python_json::python_json;
use super::tool_calls::{ToolCall, ToolCallSyntax};
use serde_json::{json, Value};

/// Where a template takes the tools a request offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolsSlot {
    /// The `tools` argument.
    Argument,
    /// A JSON string in the system message's `tools` field (Phi-4-mini).
    SystemMessageField,
    /// Nowhere: Cake describes them in the system prompt.
    Prompt,
}

/// What a chat template renders of a conversation with tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolSupport {
    pub tools: ToolsSlot,
    /// Whether an assistant turn's `tool_calls` are rendered.
    pub calls: bool,
    /// Whether `tool` turns are rendered.
    pub results: bool,
}

impl ToolSupport {
    /// What the template `source` renders.
    pub fn of_template(source: &str) -> Self {
        let tools = if source.contains("message['tools']") || source.contains("message.tools") {
            ToolsSlot::SystemMessageField
        } else if source.contains("tools") {
            ToolsSlot::Argument
        } else {
            ToolsSlot::Prompt
        };
        let names_role = |role: &str| source.contains(&format!("'{role}'")) || source.contains(&format!("\"{role}\""));
        Self { tools, calls: source.contains("tool_calls"), results: names_role("tool") || names_role("ipython") }
    }

    /// Whether `messages` with `tools` render as they are.
    pub fn renders_as_is(&self, messages: &[ChatMessage], tools: Option<&[Value]>) -> bool {
        let tools_fit = tools.is_none() || self.tools == ToolsSlot::Argument;
        let calls_fit = self.calls || messages.iter().all(|m| m.tool_calls.is_none());
        let results_fit = self.results || messages.iter().all(|m| m.role != "tool");
        tools_fit && calls_fit && results_fit
    }
}

/// `messages` (with `tools` offered) as turns a template with `support`
/// renders: what it would drop written into turns it keeps. `syntax` is
/// how the model writes calls; `system_role` tells whether the template
/// takes a system turn (else the tools' description opens the first user
/// turn), asked only when the conversation has none.
pub fn shape_conversation(
    messages: &[ChatMessage],
    tools: Option<&[Value]>,
    support: ToolSupport,
    syntax: ToolCallSyntax,
    system_role: impl FnOnce() -> bool,
) -> Vec<Value> {
    let mut turns: Vec<ChatMessage> = Vec::with_capacity(messages.len() + 1);
    for message in messages {
        let mut message = message.clone();
        if let (false, Some(calls)) = (support.calls, message.tool_calls.take()) {
            let calls: Vec<ToolCall> = calls.into_iter().map(|call| call.function).collect();
            let written = syntax.write(&calls);
            message.content = [message.content.as_str(), written.as_str()]
                .into_iter()
                .filter(|part| !part.is_empty())
                .collect::<Vec<_>>()
                .join("\n");
        }
        if message.role == "tool" && !support.results {
            let name = called_function(messages, message.tool_call_id.as_deref()).unwrap_or("the function");
            let result = format!("{name} returned: {}", message.content);
            match turns.last_mut() {
                Some(last) if last.role == "user" => last.content = format!("{}\n\n{result}", last.content),
                _ => turns.push(ChatMessage::new("user", &result)),
            }
            continue;
        }
        turns.push(message);
    }
    let mut shaped: Vec<Value> = turns.iter().map(|turn| serde_json::to_value(turn).unwrap_or(Value::Null)).collect();
    let Some(tools) = tools else { return shaped };
    match support.tools {
        ToolsSlot::Argument => {}
        ToolsSlot::SystemMessageField => {
            let functions: Vec<&Value> = tools.iter().map(|tool| &tool["function"]).collect();
            let field = Value::String(python_json(&json!(functions)));
            match shaped.first_mut().filter(|turn| turn["role"] == "system") {
                Some(system) => system["tools"] = field,
                None => shaped.insert(0, json!({"role": "system", "content": "", "tools": field})),
            }
        }
        ToolsSlot::Prompt => {
            let description = describe_tools(tools, syntax);
            let has_system = shaped.first().is_some_and(|turn| turn["role"] == "system");
            let first = shaped.first_mut().filter(|_| has_system || !system_role());
            match first {
                Some(turn) if turn["role"] == "system" => add_paragraph(turn, &description, Place::End),
                Some(turn) => add_paragraph(turn, &description, Place::Start),
                None => shaped.insert(0, json!({"role": "system", "content": description})),
            }
        }
    }
    shaped
}

/// The system prompt's paragraph that offers `tools`: their schemas, one
/// per line, and a call as the model should write it.
pub fn describe_tools(tools: &[Value], syntax: ToolCallSyntax) -> String {
    let schemas: Vec<String> = tools.iter().map(|tool| python_json(&tool["function"])).collect();
    let example = ToolCall { name: "function_name".into(), arguments: json!({"argument": "value"}) };
    format!(
        "You can call these functions, described in JSON Schema:\n{}\n\nTo call functions, reply with nothing but the calls, written like this:\n{}\nOtherwise, answer as usual.",
        schemas.join("\n"),
        syntax.write(&[example])
    )
}

/// Where a paragraph joins a turn's text.
enum Place {
    Start,
    End,
}

/// `turn`'s content with the paragraph `text` added at `place`.
fn add_paragraph(turn: &mut Value, text: &str, place: Place) {
    let content = turn["content"].as_str().unwrap_or_default();
    turn["content"] = Value::String(match place {
        _ if content.is_empty() => text.to_string(),
        Place::Start => format!("{text}\n\n{content}"),
        Place::End => format!("{content}\n\n{text}"),
    });
}

/// The function an earlier assistant turn called with `id`.
fn called_function<'a>(messages: &'a [ChatMessage], id: Option<&str>) -> Option<&'a str> {
    let id = id?;
    messages
        .iter()
        .filter_map(|m| m.tool_calls.as_ref())
        .flatten()
        .find(|call| call.id == id)
        .map(|call| call.function.name.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::chat_template::{ChatTemplate, MessageToolCall, RenderOptions};

    fn tools() -> Vec<Value> {
        vec![json!({"type": "function", "function": {"name": "get_weather", "description": "Weather now.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}})]
    }

    /// A question, a call of `get_weather` and its result.
    fn conversation() -> Vec<ChatMessage> {
        let mut call = ChatMessage::new("assistant", "");
        let function = ToolCall { name: "get_weather".into(), arguments: json!({"city": "Oslo"}) };
        call.tool_calls = Some(vec![MessageToolCall::new("c1".into(), function)]);
        let mut result = ChatMessage::new("tool", "{\"celsius\": 3}");
        result.tool_call_id = Some("c1".into());
        vec![ChatMessage::new("user", "Weather in Oslo?"), call, result]
    }

    #[test]
    fn templates_say_what_they_render() {
        let phi4 = "{% if message['role'] == 'system' and 'tools' in message %}<|tool|>{{ message['tools'] }}<|/tool|>{% endif %}";
        let support = ToolSupport::of_template(phi4);
        assert_eq!((support.tools, support.calls, support.results), (ToolsSlot::SystemMessageField, false, false));
        let qwen = "{% if tools %}{{ tools | tojson }}{% endif %}{{ m.tool_calls }}{% if m.role == \"tool\" %}";
        assert_eq!(
            ToolSupport::of_template(qwen),
            ToolSupport { tools: ToolsSlot::Argument, calls: true, results: true }
        );
        assert_eq!(ToolSupport::of_template("{{ m.content }}").tools, ToolsSlot::Prompt);
    }

    /// Phi-4-mini's template reads the tools from the system message's
    /// `tools` field and renders every turn by its role name.
    #[test]
    fn tools_reach_a_system_message_field() {
        let source = "{% for message in messages %}{% if message['role'] == 'system' and 'tools' in message and message['tools'] is not none %}{{ '<|' + message['role'] + '|>' + message['content'] + '<|tool|>' + message['tools'] + '<|/tool|>' + '<|end|>' }}{% else %}{{ '<|' + message['role'] + '|>' + message['content'] + '<|end|>' }}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>' }}{% endif %}";
        let template = ChatTemplate::new(Some(source), None, None).unwrap();
        let options = RenderOptions { tools: Some(tools()), ..Default::default() };
        let prompt = template.render_prompt(&conversation(), &options).unwrap();
        assert_eq!(
            prompt,
            "<|system|><|tool|>[{\"name\": \"get_weather\", \"description\": \"Weather now.\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}}}]<|/tool|><|end|>\
             <|user|>Weather in Oslo?<|end|>\
             <|assistant|><|tool_call|>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}]<|/tool_call|><|end|>\
             <|user|>get_weather returned: {\"celsius\": 3}<|end|><|assistant|>"
        );
    }

    /// A template that renders no tools: they are described in the system
    /// prompt, after the user's own, with a call written as replies write it.
    #[test]
    fn tools_are_described_where_the_template_takes_none() {
        let template = ChatTemplate::new(None, None, None).unwrap();
        let mut messages = conversation();
        messages.insert(0, ChatMessage::new("system", "Be brief."));
        let options = RenderOptions { tools: Some(tools()), ..Default::default() };
        let prompt = template.render_prompt(&messages, &options).unwrap();
        let description = describe_tools(&tools(), ToolCallSyntax::Json);
        assert!(description.contains("{\"name\": \"function_name\", \"arguments\": {\"argument\": \"value\"}}"));
        assert_eq!(
            prompt,
            format!(
                "<|im_start|>system\nBe brief.\n\n{description}<|im_end|>\n<|im_start|>user\nWeather in Oslo?<|im_end|>\n\
                 <|im_start|>assistant\n{{\"name\": \"get_weather\", \"arguments\": {{\"city\": \"Oslo\"}}}}<|im_end|>\n\
                 <|im_start|>user\nget_weather returned: {{\"celsius\": 3}}<|im_end|>\n<|im_start|>assistant\n"
            )
        );
        // Without tools, a conversation the template renders stays as it is.
        let plain = [ChatMessage::new("user", "Hi")];
        assert_eq!(
            template.render_prompt(&plain, &RenderOptions::default()).unwrap(),
            template.render(&plain, true).unwrap()
        );
    }
}
