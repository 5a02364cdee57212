//! Rendering conversations with the model's own Jinja chat template.
//!
//! Templates come from `tokenizer_config.json` or GGUF metadata and are
//! written for Python's Jinja2; minijinja with its Python-compatibility
//! methods (`.strip()`, `.startswith()`, …) plus the helpers transformers
//! provides (`raise_exception`, `strftime_now`) renders them. A model
//! without a template gets ChatML.

use anyhow::{Context, Result};
use minijinja::{Environment, Error, ErrorKind, Value};
use serde::{Deserialize, Serialize};

/// One turn of a conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: String,
    pub content: String,
}

impl ChatMessage {
    pub fn new(role: &str, content: &str) -> Self {
        Self { role: role.to_string(), content: content.to_string() }
    }
}

/// The template used when a model ships none.
pub const CHATML: &str = "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

pub struct ChatTemplate {
    env: Environment<'static>,
    pub bos_token: String,
    pub eos_token: String,
}

impl ChatTemplate {
    /// Compiles `source` (or ChatML when `None`).
    pub fn new(source: Option<&str>, bos_token: Option<&str>, eos_token: Option<&str>) -> Result<Self> {
        let mut env = Environment::new();
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", |message: String| -> Result<Value, Error> {
            Err(Error::new(ErrorKind::InvalidOperation, message))
        });
        env.add_function("strftime_now", |format: String| -> String {
            chrono::Local::now().format(&format).to_string()
        });
        env.add_template_owned("chat", source.unwrap_or(CHATML).to_string())
            .context("the model's chat template does not compile")?;
        Ok(Self {
            env,
            bos_token: bos_token.unwrap_or_default().to_string(),
            eos_token: eos_token.unwrap_or_default().to_string(),
        })
    }

    /// Renders `messages`, ending with the assistant's cue when `add_generation_prompt`.
    pub fn render(&self, messages: &[ChatMessage], add_generation_prompt: bool) -> Result<String> {
        let template = self.env.get_template("chat")?;
        template
            .render(minijinja::context! {
                messages => messages,
                add_generation_prompt => add_generation_prompt,
                bos_token => self.bos_token,
                eos_token => self.eos_token,
            })
            .map_err(|e| anyhow::anyhow!("cannot render the chat template: {e:#}"))
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

    #[test]
    fn python_methods_and_helpers_work() {
        let src = "{% if messages[0]['role'] != 'user' %}{{ raise_exception('first must be user') }}{% endif %}{{ bos_token }}{{ messages[0]['content'].strip() | tojson }}";
        let t = ChatTemplate::new(Some(src), Some("<s>"), None).unwrap();
        assert_eq!(t.render(&[ChatMessage::new("user", "  hi ")], false).unwrap(), "<s>\"hi\"");
        let err = t.render(&[ChatMessage::new("system", "x")], false).unwrap_err();
        assert!(format!("{err:#}").contains("first must be user"), "{err:#}");
    }
}
