//! Function calls a model writes, read back from its reply.
//!
//! Each family writes calls its own way, as its chat template shows the
//! model (and renders earlier calls): Qwen2.5/Qwen3, Hermes and SmolLM3 put
//! JSON between `<tool_call>` tags, Qwen3.5 and Qwen3-Coder put
//! `<function=…>` with `<parameter=…>` blocks there, Llama 3.x writes a bare
//! JSON object (after `<|python_tag|>` sometimes), Mistral opens with
//! `[TOOL_CALLS]` (a JSON list, or `name[ARGS]{…}` in newer releases), the
//! DeepSeek-R1 distills use their `<｜tool▁call▁begin｜>` markers, Phi-4-mini
//! a JSON list after `<|tool_call|>` (or `functools`). The
//! [`ToolCallSyntax`] is read from the template; a [`ToolCallSplitter`]
//! passes a streamed reply's text on until a call begins, then holds the
//! rest and reads the calls from it at the end. Only calls naming one of
//! the request's tools count; anything else stays text, never lost.

use super::constraint::OutputFormat;
use super::python_json::python_json;
use super::reasoning::tag_prefix_len;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

/// A call the model wrote: a function's name and its arguments (an object).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    pub name: String,
    pub arguments: Value,
}

/// How a family's replies spell calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolCallSyntax {
    /// `<tool_call>` … `</tool_call>` around JSON or `<function=…>` blocks.
    Tagged,
    /// A JSON object or list of `{"name", "parameters"|"arguments"}`,
    /// maybe after `<|python_tag|>` (Llama 3.x, and the fallback).
    Json,
    /// `[TOOL_CALLS]` then a JSON list, or `name[ARGS]{…}` per call.
    Mistral,
    /// DeepSeek's `<｜tool▁call▁begin｜>function<｜tool▁sep｜>name` and a JSON block.
    DeepSeek,
    /// Phi-4-mini's `<|tool_call|>[…]<|/tool_call|>`, or `functools[…]`.
    Phi4,
}

const TAG_OPEN: &str = "<tool_call>";
const TAG_CLOSE: &str = "</tool_call>";
const PYTHON_TAG: &str = "<|python_tag|>";
const MISTRAL_CALLS: &str = "[TOOL_CALLS]";
const MISTRAL_ARGS: &str = "[ARGS]";
const MISTRAL_CALL_ID: &str = "[CALL_ID]";
const DEEPSEEK_CALLS: &str = "<｜tool▁calls▁begin｜>";
const DEEPSEEK_CALL: &str = "<｜tool▁call▁begin｜>";
const DEEPSEEK_SEP: &str = "<｜tool▁sep｜>";
const DEEPSEEK_CALL_END: &str = "<｜tool▁call▁end｜>";
const DEEPSEEK_CALLS_END: &str = "<｜tool▁calls▁end｜>";
const PHI4_TOOLS: &str = "<|tool|>";
const PHI4_CALL: &str = "<|tool_call|>";
const PHI4_CALL_END: &str = "<|/tool_call|>";
const PHI4_FUNCTOOLS: &str = "functools[";
/// Fences a model may put around JSON calls (Gemma writes `tool_code`).
const JSON_FENCES: [&str; 2] = ["```json", "```tool_code"];

impl ToolCallSyntax {
    /// The syntax the chat template `source` teaches.
    pub fn of_template(source: &str) -> Self {
        if source.contains(TAG_OPEN) {
            Self::Tagged
        } else if source.contains(MISTRAL_CALLS) {
            Self::Mistral
        } else if source.contains(DEEPSEEK_CALL) {
            Self::DeepSeek
        } else if source.contains(PHI4_TOOLS) || source.contains(PHI4_CALL) {
            Self::Phi4
        } else {
            Self::Json
        }
    }

    /// Texts that begin a call; those that are special tokens in the
    /// vocabulary must be decoded as text so the reply shows them.
    pub fn markers(self) -> &'static [&'static str] {
        match self {
            Self::Tagged => &[TAG_OPEN],
            Self::Json => &[PYTHON_TAG],
            Self::Mistral => &[MISTRAL_CALLS, MISTRAL_ARGS, MISTRAL_CALL_ID],
            Self::DeepSeek => &[DEEPSEEK_CALLS, DEEPSEEK_CALL],
            Self::Phi4 => &[PHI4_CALL, PHI4_FUNCTOOLS],
        }
    }

    /// Whether a reply that opens with JSON may be a call.
    fn json_opens_calls(self) -> bool {
        self == Self::Json
    }

    /// The calls in `text` (which starts where a call begins) naming one of
    /// `tools`, or `None` when it does not read as calls.
    pub fn parse(self, text: &str, tools: &[Value]) -> Option<Vec<ToolCall>> {
        let calls = match self {
            Self::Tagged => parse_tagged(text, tools)?,
            Self::Json => parse_json_calls(unfenced(text.trim_start().strip_prefix(PYTHON_TAG).unwrap_or(text)))?,
            Self::Mistral => parse_mistral(text)?,
            Self::DeepSeek => parse_deepseek(text)?,
            Self::Phi4 => parse_phi4(text)?,
        };
        let known = |call: &ToolCall| tools.iter().any(|tool| tool_name(tool) == Some(call.name.as_str()));
        (!calls.is_empty() && calls.iter().all(known)).then_some(calls)
    }

    /// `calls` as a reply in this syntax writes them, for templates that
    /// do not render earlier calls themselves.
    pub fn write(self, calls: &[ToolCall]) -> String {
        let json = |call: &ToolCall| python_json(&json!({"name": call.name, "arguments": call.arguments}));
        let list = || format!("[{}]", calls.iter().map(json).collect::<Vec<_>>().join(", "));
        match self {
            Self::Tagged => {
                calls.iter().map(|c| format!("{TAG_OPEN}\n{}\n{TAG_CLOSE}", json(c))).collect::<Vec<_>>().join("\n")
            }
            Self::Json if calls.len() == 1 => json(&calls[0]),
            Self::Json => list(),
            Self::Mistral => format!("{MISTRAL_CALLS}{}", list()),
            Self::DeepSeek => {
                let blocks: String = calls
                    .iter()
                    .map(|c| {
                        format!(
                            "{DEEPSEEK_CALL}function{DEEPSEEK_SEP}{}\n```json\n{}\n```{DEEPSEEK_CALL_END}",
                            c.name,
                            python_json(&c.arguments)
                        )
                    })
                    .collect();
                format!("{DEEPSEEK_CALLS}{blocks}{DEEPSEEK_CALLS_END}")
            }
            Self::Phi4 => format!("{PHI4_CALL}{}{PHI4_CALL_END}", list()),
        }
    }
}

/// Whether a reply must call a tool.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ToolChoice {
    /// The model decides.
    #[default]
    Auto,
    /// One call, of any offered tool.
    Required,
    /// One call of this tool.
    Named(String),
}

impl ToolCallSyntax {
    /// The format that makes a reply exactly one call of one of `tools`
    /// (of `only` when named), in this syntax where the reply opens with
    /// its marker as text (`<tool_call>`), else as bare JSON (which the
    /// [`ToolCallSyntax::Json`] reader takes). `in_reasoning`: the prompt
    /// opened a reasoning block, which the reply closes first. Returns the
    /// format and the syntax to read the reply in.
    pub fn forced_call(self, tools: &[Value], only: Option<&str>, in_reasoning: bool) -> (OutputFormat, Self) {
        let calls: Vec<Value> = tools
            .iter()
            .filter(|tool| only.is_none_or(|name| tool_name(tool) == Some(name)))
            .map(|tool| {
                let arguments = match &tool["function"]["parameters"] {
                    Value::Null => json!({"type": "object"}),
                    parameters => parameters.clone(),
                };
                json!({
                    "type": "object",
                    "properties": {"name": {"const": tool_name(tool)}, "arguments": arguments},
                    "required": ["name", "arguments"],
                    "additionalProperties": false,
                })
            })
            .collect();
        let call = json!({"anyOf": calls, "x-guidance": {"whitespace_flexible": false, "item_separator": ", ", "key_separator": ": "}});
        let (body, syntax) = match self {
            Self::Tagged => (format!("\"{TAG_OPEN}\\n\" call \"\\n{TAG_CLOSE}\""), Self::Tagged),
            _ => ("call".to_string(), Self::Json),
        };
        let opening = if in_reasoning { "\"</think>\\n\\n\" " } else { "" };
        (OutputFormat::Lark(format!("start: {opening}{body}\ncall: %json {call}\n")), syntax)
    }
}

/// A tool's function name, from OpenAI's `{"type": "function", "function": {"name"}}`.
pub fn tool_name(tool: &Value) -> Option<&str> {
    tool["function"]["name"].as_str()
}

/// `{"name", "arguments"|"parameters"}` (arguments as an object or as a
/// string holding one) as a call.
fn call_of_json(value: &Value) -> Option<ToolCall> {
    let name = value["name"].as_str()?.to_string();
    let arguments = match value.get("arguments").or_else(|| value.get("parameters")) {
        None => Value::Object(Map::new()),
        Some(Value::String(text)) => serde_json::from_str(text).ok()?,
        Some(arguments) => arguments.clone(),
    };
    arguments.is_object().then_some(ToolCall { name, arguments })
}

/// JSON values one after another, separated by whitespace or `;` (Llama
/// 3.2 writes several calls that way); lists are flattened.
fn parse_json_calls(text: &str) -> Option<Vec<ToolCall>> {
    let mut calls = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        let mut values = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
        let value = values.next()?.ok()?;
        rest = rest[values.byte_offset()..].trim_start().trim_start_matches(';').trim_start();
        match value {
            Value::Array(items) => calls.extend(items.iter().map(call_of_json).collect::<Option<Vec<_>>>()?),
            other => calls.push(call_of_json(&other)?),
        }
    }
    Some(calls)
}

/// `text` without a ```` ```json ```` or ```` ```tool_code ```` fence around it.
fn unfenced(text: &str) -> &str {
    let trimmed = text.trim();
    JSON_FENCES.iter().find_map(|fence| trimmed.strip_prefix(fence)?.trim_end().strip_suffix("```")).unwrap_or(text)
}

/// `<tool_call>` blocks, each JSON or a `<function=…>` block; only
/// whitespace may lie between and after them.
fn parse_tagged(text: &str, tools: &[Value]) -> Option<Vec<ToolCall>> {
    let mut calls = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        let inner = rest.strip_prefix(TAG_OPEN)?;
        let end = inner.find(TAG_CLOSE)?;
        let body = inner[..end].trim();
        rest = inner[end + TAG_CLOSE.len()..].trim_start();
        if body.starts_with("<function=") {
            calls.push(parse_function_block(body, tools)?);
        } else {
            calls.extend(parse_json_calls(body)?);
        }
    }
    Some(calls)
}

/// `<function=name>` then `<parameter=key>\nvalue\n</parameter>` blocks
/// and `</function>`. A value is JSON where the tool's schema says the
/// parameter is not a string and the text reads as JSON, else text.
fn parse_function_block(body: &str, tools: &[Value]) -> Option<ToolCall> {
    let after = body.strip_prefix("<function=")?;
    let (name, mut rest) = after.split_once('>')?;
    let name = name.trim().to_string();
    let schema = tools.iter().find(|t| tool_name(t) == Some(name.as_str())).map(|t| &t["function"]["parameters"]);
    let mut arguments = Map::new();
    loop {
        rest = rest.trim_start();
        if let Some(after) = rest.strip_prefix("</function>") {
            return after.trim().is_empty().then(|| ToolCall { name, arguments: Value::Object(arguments) });
        }
        let (key, after) = rest.strip_prefix("<parameter=")?.split_once('>')?;
        let end = after.find("</parameter>")?;
        let raw = after[..end].strip_prefix('\n').unwrap_or(&after[..end]);
        let raw = raw.strip_suffix('\n').unwrap_or(raw);
        let declared = schema.and_then(|s| s["properties"][key.trim()]["type"].as_str());
        let value = match declared {
            Some("string") | None => Value::String(raw.to_string()),
            Some(_) => serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_string())),
        };
        arguments.insert(key.trim().to_string(), value);
        rest = &after[end + "</parameter>".len()..];
    }
}

/// `[TOOL_CALLS][{…}, …]`, or `[TOOL_CALLS]name[CALL_ID]id[ARGS]{…}` repeated.
fn parse_mistral(text: &str) -> Option<Vec<ToolCall>> {
    let rest = text.trim().strip_prefix(MISTRAL_CALLS)?.trim_start();
    if rest.starts_with('[') {
        return parse_json_calls(rest);
    }
    let mut calls = Vec::new();
    for part in rest.split(MISTRAL_CALLS) {
        let (head, arguments) = part.split_once(MISTRAL_ARGS)?;
        let name = head.split(MISTRAL_CALL_ID).next()?.trim().to_string();
        let arguments: Value = serde_json::from_str(arguments.trim()).ok()?;
        if name.is_empty() || !arguments.is_object() {
            return None;
        }
        calls.push(ToolCall { name, arguments });
    }
    Some(calls)
}

/// `<｜tool▁call▁begin｜>function<｜tool▁sep｜>name` then ```` ```json ```` with
/// the arguments, up to `<｜tool▁call▁end｜>`, for each call.
fn parse_deepseek(text: &str) -> Option<Vec<ToolCall>> {
    let mut calls = Vec::new();
    for block in text.split(DEEPSEEK_CALL).skip(1) {
        let (_, after) = block.split_once(DEEPSEEK_SEP)?;
        let body = after.split(DEEPSEEK_CALL_END).next()?;
        let (name, arguments) = body.split_once('\n')?;
        let arguments = arguments.trim().strip_prefix("```json")?.trim_end().strip_suffix("```")?;
        let arguments: Value = serde_json::from_str(arguments.trim()).ok()?;
        if !arguments.is_object() {
            return None;
        }
        calls.push(ToolCall { name: name.trim().to_string(), arguments });
    }
    Some(calls)
}

/// `<|tool_call|>[…]<|/tool_call|>` blocks (the end marker may be
/// missing at the reply's end), or `functools[…]`.
fn parse_phi4(text: &str) -> Option<Vec<ToolCall>> {
    let rest = text.trim();
    if rest.starts_with(PHI4_FUNCTOOLS) {
        return parse_json_calls(&rest[PHI4_FUNCTOOLS.len() - 1..]); // from the `[`
    }
    let mut calls = Vec::new();
    for block in rest.strip_prefix(PHI4_CALL)?.split(PHI4_CALL) {
        let body = block.trim();
        calls.extend(parse_json_calls(body.strip_suffix(PHI4_CALL_END).unwrap_or(body))?);
    }
    Some(calls)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Nothing but whitespace yet.
    Start,
    /// Text; a call may still begin.
    Text,
    /// A call began: everything is held to the end.
    Calls,
}

/// Splits a streamed answer into text and, at its end, calls.
#[derive(Debug, Clone)]
pub struct ToolCallSplitter {
    syntax: ToolCallSyntax,
    tools: Vec<Value>,
    phase: Phase,
    held: String,
}

/// What a reply ended with.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SplitEnd {
    /// Text still held that is not a call.
    pub text: String,
    pub calls: Vec<ToolCall>,
}

impl ToolCallSplitter {
    pub fn new(syntax: ToolCallSyntax, tools: Vec<Value>) -> Self {
        Self { syntax, tools, phase: Phase::Start, held: String::new() }
    }

    /// The text `piece` lets out (what can no longer begin a call).
    pub fn push(&mut self, piece: &str) -> String {
        self.held.push_str(piece);
        if self.phase == Phase::Start {
            let trimmed = self.held.trim_start();
            if trimmed.is_empty() {
                return String::new();
            }
            if self.syntax.json_opens_calls() {
                let opens_json = trimmed.starts_with('{')
                    || trimmed.starts_with('[')
                    || JSON_FENCES.iter().any(|fence| trimmed.starts_with(fence));
                if opens_json {
                    self.phase = Phase::Calls;
                    return String::new();
                }
                if JSON_FENCES.iter().any(|fence| fence.starts_with(trimmed)) {
                    return String::new(); // a fence may be opening
                }
            }
            self.phase = Phase::Text;
        }
        if self.phase == Phase::Calls {
            return String::new();
        }
        let markers = self.syntax.markers();
        if let Some(at) = markers.iter().filter_map(|m| self.held.find(m)).min() {
            self.phase = Phase::Calls;
            let text = self.held[..at].to_string();
            self.held.drain(..at);
            return text;
        }
        let keep = markers.iter().map(|m| tag_prefix_len(&self.held, m)).max().unwrap_or(0);
        let done = self.held.len() - keep;
        self.held.drain(..done).collect()
    }

    /// The reply's end: the calls, or the held text when it is not calls.
    pub fn finish(&mut self) -> SplitEnd {
        let held = std::mem::take(&mut self.held);
        if self.phase == Phase::Calls {
            if let Some(calls) = self.syntax.parse(&held, &self.tools) {
                return SplitEnd { text: String::new(), calls };
            }
        }
        SplitEnd { text: held, calls: Vec::new() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tools() -> Vec<Value> {
        let weather = json!({"type": "function", "function": {"name": "get_weather", "parameters": {
            "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}});
        vec![weather]
    }

    fn weather(city: &str) -> ToolCall {
        ToolCall { name: "get_weather".into(), arguments: json!({"city": city}) }
    }

    /// Streams `pieces` through a splitter: the text let out and the end.
    fn split(syntax: ToolCallSyntax, pieces: &[&str]) -> (String, SplitEnd) {
        let mut splitter = ToolCallSplitter::new(syntax, tools());
        let text: String = pieces.iter().map(|p| splitter.push(p)).collect();
        (text, splitter.finish())
    }

    #[test]
    fn tagged_json_calls_come_apart_from_the_text_before_them() {
        let (text, end) = split(
            ToolCallSyntax::Tagged,
            &[
                "Let me check.\n<tool",
                "_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
            ],
        );
        assert_eq!(text, "Let me check.\n");
        assert_eq!(end, SplitEnd { text: String::new(), calls: vec![weather("Paris")] });
    }

    #[test]
    fn function_blocks_take_types_from_the_schema() {
        let reply = "<tool_call>\n<function=get_weather>\n<parameter=city>\nNew York\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>";
        let calls = ToolCallSyntax::Tagged.parse(reply, &tools()).unwrap();
        assert_eq!(calls, [ToolCall { name: "get_weather".into(), arguments: json!({"city": "New York", "days": 3}) }]);
    }

    #[test]
    fn bare_json_python_tag_and_several_calls_read() {
        let syntax = ToolCallSyntax::Json;
        let one = r#"{"name": "get_weather", "parameters": {"city": "Oslo"}}"#;
        assert_eq!(split(syntax, &["  ", one]).1.calls, [weather("Oslo")]);
        let tagged = format!("<|python_tag|>{one}");
        assert_eq!(split(syntax, &[&tagged]).1.calls, [weather("Oslo")]);
        let two = r#"{"name": "get_weather", "parameters": {"city": "Oslo"}}; {"name": "get_weather", "arguments": "{\"city\": \"Rome\"}"}"#;
        assert_eq!(syntax.parse(two, &tools()).unwrap(), [weather("Oslo"), weather("Rome")]);
    }

    #[test]
    fn mistral_lists_and_args_forms_read() {
        let list = r#"[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Lyon"}, "id": "abcdefghi"}]"#;
        assert_eq!(ToolCallSyntax::Mistral.parse(list, &tools()).unwrap(), [weather("Lyon")]);
        let args = r#"[TOOL_CALLS]get_weather[CALL_ID]abcdefghi[ARGS]{"city": "Lyon"}[TOOL_CALLS]get_weather[ARGS]{"city": "Nice"}"#;
        assert_eq!(ToolCallSyntax::Mistral.parse(args, &tools()).unwrap(), [weather("Lyon"), weather("Nice")]);
    }

    #[test]
    fn deepseek_blocks_read() {
        let reply = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Kyiv\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
        assert_eq!(ToolCallSyntax::DeepSeek.parse(reply, &tools()).unwrap(), [weather("Kyiv")]);
    }

    #[test]
    fn what_is_not_a_call_to_a_given_tool_stays_text() {
        let unknown = r#"{"name": "launch_rocket", "parameters": {}}"#;
        assert_eq!(
            split(ToolCallSyntax::Json, &[unknown]),
            (String::new(), SplitEnd { text: unknown.into(), calls: vec![] })
        );
        let data = r#"{"city": "Paris"}"#;
        assert_eq!(split(ToolCallSyntax::Json, &[data]).1.text, data);
        let cut = "<tool_call>\n{\"name\": \"get_weather\", \"argu";
        assert_eq!(
            split(ToolCallSyntax::Tagged, &["Hi ", cut]),
            ("Hi ".into(), SplitEnd { text: cut.into(), calls: vec![] })
        );
        assert_eq!(split(ToolCallSyntax::Tagged, &["a <b>c"]).0, "a <b>c");
        assert_eq!(split(ToolCallSyntax::Json, &["It is ", "{ok}"]).0, "It is {ok}");
    }

    #[test]
    fn phi4_lists_read_with_or_without_their_end_marker() {
        let tagged = r#"<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Bern"}}]<|/tool_call|>"#;
        assert_eq!(split(ToolCallSyntax::Phi4, &["<|tool_", &tagged[7..]]).1.calls, [weather("Bern")]);
        let open = r#"<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Bern"}}]"#;
        assert_eq!(ToolCallSyntax::Phi4.parse(open, &tools()).unwrap(), [weather("Bern")]);
        let functools = r#"functools[{"name": "get_weather", "arguments": {"city": "Bern"}}]"#;
        assert_eq!(
            split(ToolCallSyntax::Phi4, &["Sure. ", functools]),
            ("Sure. ".into(), split(ToolCallSyntax::Phi4, &[functools]).1)
        );
        assert_eq!(ToolCallSyntax::Phi4.parse(functools, &tools()).unwrap(), [weather("Bern")]);
    }

    #[test]
    fn fenced_json_calls_read_and_other_fences_stay_text() {
        let fenced = "```tool_code\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n```";
        assert_eq!(split(ToolCallSyntax::Json, &["`", "``", &fenced[3..]]).1.calls, [weather("Oslo")]);
        let json = "```json\n[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}]\n```";
        assert_eq!(split(ToolCallSyntax::Json, &[json]).1.calls, [weather("Oslo")]);
        assert_eq!(split(ToolCallSyntax::Json, &["``", "`python\nprint(1)\n```"]).0, "```python\nprint(1)\n```");
    }

    #[test]
    fn written_calls_read_back_in_every_syntax() {
        let calls =
            [weather("Paris"), ToolCall { name: "get_weather".into(), arguments: json!({"city": "Jaén", "days": 2}) }];
        let syntaxes = [
            ToolCallSyntax::Tagged,
            ToolCallSyntax::Json,
            ToolCallSyntax::Mistral,
            ToolCallSyntax::DeepSeek,
            ToolCallSyntax::Phi4,
        ];
        for syntax in syntaxes {
            for some in [&calls[..1], &calls[..]] {
                let written = syntax.write(some);
                let (text, end) = split(syntax, &[&written]);
                assert_eq!((text.as_str(), end.calls.as_slice()), ("", some), "{syntax:?}: {written}");
            }
        }
        assert_eq!(
            ToolCallSyntax::Json.write(&calls[..1]),
            r#"{"name": "get_weather", "arguments": {"city": "Paris"}}"#
        );
    }

    #[test]
    fn the_syntax_follows_the_template() {
        assert_eq!(
            ToolCallSyntax::of_template("{{ '<|tool|>' + message['tools'] + '<|/tool|>' }}"),
            ToolCallSyntax::Phi4
        );
        assert_eq!(ToolCallSyntax::of_template("… <tool_call>\n{{ tool_call.name }}"), ToolCallSyntax::Tagged);
        assert_eq!(ToolCallSyntax::of_template("{{ '[TOOL_CALLS]' }}"), ToolCallSyntax::Mistral);
        assert_eq!(ToolCallSyntax::of_template("{{ '<｜tool▁call▁begin｜>' }}"), ToolCallSyntax::DeepSeek);
        assert_eq!(ToolCallSyntax::of_template("{{ '<|python_tag|>' }}"), ToolCallSyntax::Json);
    }
}
