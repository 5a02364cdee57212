//! Rendering conversations with the model's own Jinja chat template.
//!
//! Templates come from `tokenizer_config.json` or GGUF metadata and are
//! written for Python's Jinja2; minijinja with its Python-compatibility
//! methods (`.strip()`, `.startswith()`, …) plus the helpers transformers
//! provides (`raise_exception`, `strftime_now`, its `tojson`, blocks
//! trimmed as its environment trims them) renders them. A model
//! without a template gets ChatML.
//!
//! A template is code from a downloaded file, so a render is bounded: at
//! most [`RENDER_FUEL`] instructions (minijinja's fuel) and
//! [`MAX_RENDERED_BYTES`] of output. Beyond either it is an error naming the
//! limit, never a hang or a runaway allocation.

use super::content_parts::{mark_pictures, with_content_parts};
use super::pictures::{AttachedPicture, PICTURE_MARK};
use super::python_json::{to_python_json, PythonJsonStyle};
use super::reasoning::THINK_OPEN;
use super::tool_calls::{ToolCall, ToolCallSyntax};
use super::tool_prompt::{shape_conversation, ToolSupport, ToolsSlot};
use anyhow::{Context, Result};
use minijinja::value::Kwargs;
use minijinja::{Environment, Error, ErrorKind, Value};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::sync::{Arc, OnceLock};

/// One turn of a conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: String,
    pub content: String,
    /// An assistant turn's reasoning, kept apart from its `content`
    /// (templates that show earlier reasoning read it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    /// The calls an assistant turn made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<MessageToolCall>>,
    /// The call a `tool` turn answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// The pictures of the turn, in order: each one's place in `content`
    /// is held by a [`PICTURE_MARK`].
    #[serde(skip)]
    pub pictures: Vec<Arc<AttachedPicture>>,
}

/// A part of a turn as people write it.
#[derive(Debug, Clone)]
pub enum MessagePart {
    Text(String),
    Picture(AttachedPicture),
}

impl ChatMessage {
    pub fn new(role: &str, content: &str) -> Self {
        Self {
            role: role.to_string(),
            content: content.to_string(),
            reasoning_content: None,
            tool_calls: None,
            tool_call_id: None,
            pictures: Vec::new(),
        }
    }

    /// A turn of text and pictures in order (a [`PICTURE_MARK`] someone
    /// typed is dropped: only pictures hold one).
    pub fn with_parts(role: &str, parts: Vec<MessagePart>) -> Self {
        let mut message = Self::new(role, "");
        for part in parts {
            match part {
                MessagePart::Text(text) => message.content.extend(text.chars().filter(|&c| c != PICTURE_MARK)),
                MessagePart::Picture(picture) => {
                    message.content.push(PICTURE_MARK);
                    message.pictures.push(Arc::new(picture));
                }
            }
        }
        message
    }

    /// The texts people wrote in this turn, around its pictures.
    pub fn written_texts(&self) -> impl Iterator<Item = &str> {
        self.content.split(PICTURE_MARK)
    }
}

/// A call in a conversation, in OpenAI's shape (which templates read):
/// `{"id", "type": "function", "function": {"name", "arguments": {…}}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageToolCall {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub function: ToolCall,
}

impl MessageToolCall {
    pub fn new(id: String, function: ToolCall) -> Self {
        Self { id, kind: "function".into(), function }
    }
}

/// What a render passes the template besides the messages.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RenderOptions {
    /// The functions the model may call, in OpenAI's `tools` shape.
    pub tools: Option<Vec<serde_json::Value>>,
    /// `false` asks a template that can switch reasoning off (Qwen3's
    /// `enable_thinking`) to do so; `None` leaves the template's default.
    pub enable_thinking: Option<bool>,
}

/// Instructions one render may run: real templates use a few hundred per
/// message, so this allows conversations of thousands of turns.
pub const RENDER_FUEL: u64 = 20_000_000;
/// Bytes one render may produce (a prompt far beyond any context length).
pub const MAX_RENDERED_BYTES: usize = 64 << 20;

/// The template used when a model ships none.
pub const CHATML: &str = "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

/// Gemma's turns, for a Gemma file that ships no template (base models):
/// the system prompt opens the first user turn, as Gemma's own templates do.
pub const GEMMA_TURNS: &str = "{{ bos_token }}{% set ns = namespace(system='') %}{% for message in messages %}{% if message['role'] == 'system' %}{% set ns.system = message['content'] | trim + '\n\n' %}{% else %}{{ '<start_of_turn>' + ('model' if message['role'] == 'assistant' else 'user') + '\n' + ns.system + message['content'] | trim + '<end_of_turn>\n' }}{% set ns.system = '' %}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<start_of_turn>model\n' }}{% endif %}";

/// The template for a model that ships none: its family's turn markers
/// where its vocabulary has them (`is_token` says which), else ChatML.
pub fn fallback_template(is_token: impl Fn(&str) -> bool) -> &'static str {
    if is_token("<start_of_turn>") && is_token("<end_of_turn>") && !is_token("<|im_start|>") {
        GEMMA_TURNS
    } else {
        CHATML
    }
}

/// A system prompt no template writes by itself, to see whether a
/// template keeps the system turn.
const SYSTEM_PROBE: &str = "Cake checks the system turn.";

/// Texts no template writes by itself, to see how a template reads a
/// message's content.
const CONTENT_PROBE: &str = "Cake checks how content is read.";
const BEFORE_PICTURE: &str = "Cake checks the text before a picture.";
const AFTER_PICTURE: &str = "Cake checks the text after a picture.";

/// How a template reads a message's content.
#[derive(Debug, Clone, PartialEq, Eq)]
enum ContentShape {
    /// As a string (most templates; pictures are held by marks in it).
    Text,
    /// Only as a list of typed parts (SmolVLM's), writing `picture` for
    /// each image part.
    Parts { picture: String },
}

pub struct ChatTemplate {
    env: Environment<'static>,
    pub bos_token: String,
    pub eos_token: String,
    /// Whether the template writes reasoning blocks (mentions `<think>`).
    thinks: bool,
    /// How the template shows the model to write calls.
    tool_call_syntax: ToolCallSyntax,
    /// What the template renders of tools, calls and their results.
    tool_support: ToolSupport,
    /// How it reads a message's content, found on first use.
    content: OnceLock<ContentShape>,
}

impl ChatTemplate {
    /// Compiles `source` (or ChatML when `None`).
    pub fn new(source: Option<&str>, bos_token: Option<&str>, eos_token: Option<&str>) -> Result<Self> {
        let mut env = Environment::new();
        // As transformers' environment: a block tag's own line break and
        // leading indentation are not output.
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.set_fuel(Some(RENDER_FUEL));
        env.add_filter("tojson", python_tojson);
        env.add_function("raise_exception", |message: String| -> Result<Value, Error> {
            Err(Error::new(ErrorKind::InvalidOperation, message))
        });
        env.add_function("strftime_now", |format: String| -> String {
            chrono::Local::now().format(&format).to_string()
        });
        let source = source.unwrap_or(CHATML);
        env.add_template_owned("chat", source.to_string()).context("the model's chat template does not compile")?;
        Ok(Self {
            env,
            bos_token: bos_token.unwrap_or_default().to_string(),
            eos_token: eos_token.unwrap_or_default().to_string(),
            thinks: source.contains(THINK_OPEN),
            tool_call_syntax: ToolCallSyntax::of_template(source),
            tool_support: ToolSupport::of_template(source),
            content: OnceLock::new(),
        })
    }

    /// How the template reads a message's content: as a string unless it
    /// writes a string content's text only when given as a text part.
    fn content_shape(&self) -> ContentShape {
        let none = RenderOptions::default();
        let writes = |content: serde_json::Value, text: &str| -> Option<String> {
            let turn = [serde_json::json!({ "role": "user", "content": content })];
            self.render_raw(&turn, true, &none).ok().filter(|rendered| rendered.contains(text))
        };
        let turn = [ChatMessage::new("user", CONTENT_PROBE)];
        match self.render_raw(&turn, true, &none) {
            // A template that fails on a plain turn is not probed further.
            Err(_) => return ContentShape::Text,
            Ok(rendered) if rendered.contains(CONTENT_PROBE) => return ContentShape::Text,
            Ok(_) => {}
        }
        let as_part = serde_json::json!([{ "type": "text", "text": CONTENT_PROBE }]);
        if writes(as_part, CONTENT_PROBE).is_none() {
            return ContentShape::Text;
        }
        let around = serde_json::json!([
            { "type": "text", "text": BEFORE_PICTURE }, { "type": "image" }, { "type": "text", "text": AFTER_PICTURE },
        ]);
        let picture = writes(around, AFTER_PICTURE)
            .and_then(|rendered| {
                let (_, after) = rendered.split_once(BEFORE_PICTURE)?;
                Some(after.split_once(AFTER_PICTURE)?.0.to_string())
            })
            .unwrap_or_default();
        ContentShape::Parts { picture }
    }

    /// Whether the template keeps a system turn (Gemma 2's refuses one).
    fn takes_system_turn(&self) -> bool {
        let probe = [ChatMessage::new("system", SYSTEM_PROBE), ChatMessage::new("user", "Hi")];
        self.render(&probe, true).is_ok_and(|text| text.contains(SYSTEM_PROBE))
    }

    /// How replies to this template's prompts spell function calls.
    pub fn tool_call_syntax(&self) -> ToolCallSyntax {
        self.tool_call_syntax
    }

    /// Whether replies to this template's prompts may hold a reasoning block.
    pub fn thinks(&self) -> bool {
        self.thinks
    }

    /// Renders `messages`, ending with the assistant's cue when `add_generation_prompt`.
    pub fn render(&self, messages: &[ChatMessage], add_generation_prompt: bool) -> Result<String> {
        self.render_with(messages, add_generation_prompt, &RenderOptions::default())
    }

    /// A request's prompt: `messages` and the tools `options` offer, with
    /// what the template would drop (tools it does not take, calls and
    /// results it does not render) written into turns it keeps.
    pub fn render_prompt(&self, messages: &[ChatMessage], options: &RenderOptions) -> Result<String> {
        let tools = options.tools.as_deref();
        if self.tool_support.renders_as_is(messages, tools) {
            return self.render_with(messages, true, options);
        }
        let system_role = || self.takes_system_turn();
        let shaped = shape_conversation(messages, tools, self.tool_support, self.tool_call_syntax, system_role);
        let argument = self.tool_support.tools == ToolsSlot::Argument;
        let options = RenderOptions { tools: options.tools.clone().filter(|_| argument), ..options.clone() };
        self.render_turns(&shaped, true, &options)
    }

    /// [`Self::render`] with `options` passed to the template.
    pub fn render_with(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
        options: &RenderOptions,
    ) -> Result<String> {
        self.render_turns(messages, add_generation_prompt, options)
    }

    /// Renders `messages`, any serializable list of turns, their contents
    /// as the template reads them.
    fn render_turns<T: Serialize>(
        &self,
        messages: &[T],
        add_generation_prompt: bool,
        options: &RenderOptions,
    ) -> Result<String> {
        let ContentShape::Parts { picture } = self.content.get_or_init(|| self.content_shape()) else {
            return self.render_raw(messages, add_generation_prompt, options);
        };
        let turns = with_content_parts(serde_json::to_value(messages).context("cannot pass the turns on")?);
        let rendered =
            self.render_raw(turns.as_array().map_or(&[][..], Vec::as_slice), add_generation_prompt, options)?;
        Ok(mark_pictures(&rendered, &turns, picture))
    }

    /// Renders `messages` as they are.
    fn render_raw<T: Serialize>(
        &self,
        messages: &[T],
        add_generation_prompt: bool,
        options: &RenderOptions,
    ) -> Result<String> {
        let template = self.env.get_template("chat")?;
        let mut output = CappedBuffer::default();
        let base = minijinja::context! {
            messages => messages,
            add_generation_prompt => add_generation_prompt,
            bos_token => self.bos_token,
            eos_token => self.eos_token,
        };
        // Only what was asked for is defined: templates test `is defined`.
        let thinking = match options.enable_thinking {
            Some(enabled) => minijinja::context! { enable_thinking => enabled },
            None => minijinja::context! {},
        };
        let tools = match &options.tools {
            Some(tools) => minijinja::context! { tools => tools },
            None => minijinja::context! {},
        };
        let context = minijinja::context! { ..base, ..thinking, ..tools };
        match template.render_captured_to(context, &mut output) {
            Ok(_) => String::from_utf8(output.bytes).context("the chat template produced invalid UTF-8"),
            Err(_) if output.overflowed => anyhow::bail!(
                "the chat template's output grew past {} MiB: the template is broken or hostile",
                MAX_RENDERED_BYTES >> 20
            ),
            Err(e) if e.kind() == ErrorKind::OutOfFuel => anyhow::bail!(
                "the chat template ran more than {RENDER_FUEL} steps without finishing: the template is broken or hostile"
            ),
            Err(e) => Err(anyhow::anyhow!("cannot render the chat template: {e:#}")),
        }
    }
}

/// transformers' `tojson`: `json.dumps(value, ensure_ascii=False, indent=None,
/// separators=None, sort_keys=False)`, spelled as Python spells it.
fn python_tojson(value: &Value, kwargs: Kwargs) -> Result<Value, Error> {
    let indent: Option<usize> = kwargs.get("indent")?;
    let ensure_ascii: Option<bool> = kwargs.get("ensure_ascii")?;
    let sort_keys: Option<bool> = kwargs.get("sort_keys")?;
    let separators: Option<Vec<String>> = kwargs.get("separators")?;
    kwargs.assert_all_used()?;
    let separators = match separators.as_deref() {
        None => None,
        Some([item, key]) => Some((item.clone(), key.clone())),
        Some(_) => return Err(Error::new(ErrorKind::InvalidOperation, "tojson separators must be (item, key)")),
    };
    let style = PythonJsonStyle { indent, ensure_ascii: ensure_ascii.unwrap_or(false), separators };
    let written = if sort_keys.unwrap_or(false) {
        let plain = serde_json::to_value(value).map_err(json_error)?;
        to_python_json(&sorted_keys(plain), &style)
    } else {
        to_python_json(value, &style)
    };
    written.map(Value::from_safe_string).map_err(json_error)
}

fn json_error(e: serde_json::Error) -> Error {
    Error::new(ErrorKind::InvalidOperation, "cannot write the value as JSON").with_source(e)
}

/// `value` with every object's keys in sorted order.
fn sorted_keys(value: serde_json::Value) -> serde_json::Value {
    match value {
        serde_json::Value::Object(map) => {
            let mut entries: Vec<_> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            serde_json::Value::Object(entries.into_iter().map(|(k, v)| (k, sorted_keys(v))).collect())
        }
        serde_json::Value::Array(items) => serde_json::Value::Array(items.into_iter().map(sorted_keys).collect()),
        other => other,
    }
}

/// Collects a render's output, refusing to grow past [`MAX_RENDERED_BYTES`].
#[derive(Default)]
struct CappedBuffer {
    bytes: Vec<u8>,
    overflowed: bool,
}

impl Write for CappedBuffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.bytes.len() + buf.len() > MAX_RENDERED_BYTES {
            self.overflowed = true;
            return Err(std::io::Error::other("output limit reached"));
        }
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chatml_fallback_renders_turns_and_cue() {
        let t = ChatTemplate::new(None, None, None).unwrap();
        let text = t.render(&[ChatMessage::new("system", "Be brief."), ChatMessage::new("user", "Hi")], true).unwrap();
        assert_eq!(
            text,
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
        );
    }

    /// A template that reads content only as typed parts (SmolVLM's, in
    /// short) gets parts: text-only turns render, and a picture's place is
    /// marked where the template writes it.
    #[test]
    fn templates_that_read_only_parts_get_parts() {
        let source =
            "{% for m in messages %}{{ m['role'] | capitalize }}{% if m['content'][0]['type'] == 'image' %}:{% \
                      else %}: {% endif %}{% for p in m['content'] %}{% if p['type'] == 'text' %}{{ p['text'] }}{% \
                      elif p['type'] == 'image' %}<image>{% endif %}{% endfor %}<end>\n{% endfor %}Assistant:";
        let t = ChatTemplate::new(Some(source), None, None).unwrap();
        let text = t.render(&[ChatMessage::new("user", "Hi"), ChatMessage::new("assistant", "Hello")], true).unwrap();
        assert_eq!(text, "User: Hi<end>\nAssistant: Hello<end>\nAssistant:");
        let with_picture = ChatMessage::new("user", &format!("{PICTURE_MARK}Say <image>"));
        let text = t.render(&[with_picture], true).unwrap();
        assert_eq!(text, format!("User:{PICTURE_MARK}Say <image><end>\nAssistant:"));
        assert_eq!(t.content_shape(), ContentShape::Parts { picture: "<image>".into() });
        // A template that reads strings keeps them.
        assert_eq!(ChatTemplate::new(None, None, None).unwrap().content_shape(), ContentShape::Text);
    }

    #[test]
    fn python_methods_and_helpers_work() {
        let src = "{% if messages[0]['role'] != 'user' %}{{ raise_exception('first must be user') }}{% endif %}{{ bos_token }}{{ messages[0]['content'].strip() | tojson }}";
        let t = ChatTemplate::new(Some(src), Some("<s>"), None).unwrap();
        assert_eq!(t.render(&[ChatMessage::new("user", "  hi ")], false).unwrap(), "<s>\"hi\"");
        let err = t.render(&[ChatMessage::new("system", "x")], false).unwrap_err();
        assert!(format!("{err:#}").contains("first must be user"), "{err:#}");
    }

    #[test]
    fn thinking_can_be_switched_off_where_the_template_allows() {
        let source =
            "{% if enable_thinking is defined and enable_thinking is false %}off{% else %}on{% endif %}<think>";
        let t = ChatTemplate::new(Some(source), None, None).unwrap();
        let messages = [ChatMessage::new("user", "hi")];
        assert!(t.thinks());
        assert_eq!(t.render(&messages, true).unwrap(), "on<think>");
        let off = RenderOptions { enable_thinking: Some(false), ..Default::default() };
        assert_eq!(t.render_with(&messages, true, &off).unwrap(), "off<think>");
        assert!(!ChatTemplate::new(None, None, None).unwrap().thinks());
    }

    #[test]
    fn endless_templates_stop_with_a_clear_error() {
        let messages = [ChatMessage::new("user", "hi")];
        let looping = "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}";
        let e = ChatTemplate::new(Some(looping), None, None).unwrap().render(&messages, true).unwrap_err();
        assert!(e.to_string().contains("MiB") || e.to_string().contains("steps"), "{e}");
        let quiet_loop = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}";
        let e = ChatTemplate::new(Some(quiet_loop), None, None).unwrap().render(&messages, true).unwrap_err();
        assert!(e.to_string().contains("steps without finishing"), "{e}");
        let growing = "{% for i in range(1000) %}{{ 'x' * 1000000 }}{% endfor %}";
        let e = ChatTemplate::new(Some(growing), None, None).unwrap().render(&messages, true).unwrap_err();
        assert!(e.to_string().contains("grew past 64 MiB"), "{e}");
    }
}
