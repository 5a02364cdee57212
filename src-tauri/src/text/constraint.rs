//! Constrained decoding: replies that must follow a format (a JSON schema,
//! any JSON object, a grammar) sample only tokens that keep the text a
//! valid prefix of it, and may end only where the format is complete.
//!
//! llguidance (the mask engine llama.cpp, vLLM and SGLang use) compiles the
//! format against the vocabulary's bytes ([`TextTokenizer::token_pieces`])
//! and computes each step's allowed tokens. A [`ConstraintCompiler`] is
//! built once per model; each reply gets its own [`Constraint`].
//!
//! JSON comes out as people write it (one space after `:` and `,`, no
//! runs of whitespace), and a run of digits stops at [`MAX_DIGIT_RUN`]
//! where the format allows anything else: a small model sampling a
//! number's fraction can otherwise write digits until its token budget
//! runs out (llama.cpp's JSON grammars bound number parts to 16 digits too).

use super::tokenizer::{TextTokenizer, TokenPiece};
use anyhow::{anyhow, Result};
use llguidance::api::TopLevelGrammar;
use llguidance::toktrie::{ApproximateTokEnv, TokRxInfo, TokTrie};
use llguidance::{Matcher, ParserFactory};
use serde_json::{json, Value};
use std::sync::Arc;

/// What a reply must be.
#[derive(Debug, Clone, PartialEq)]
pub enum OutputFormat {
    /// Any JSON object.
    JsonObject,
    /// JSON valid under this schema.
    JsonSchema(Value),
    /// Text a Lark grammar (llguidance's dialect, `%json{…}` included) accepts.
    Lark(String),
}

/// A format that cannot be used: the request's fault (an unsupported
/// keyword, a schema nothing satisfies), said in the message.
#[derive(Debug)]
pub struct BadOutputFormat(pub String);

impl std::fmt::Display for BadOutputFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the requested output format cannot be used: {}", self.0)
    }
}

impl std::error::Error for BadOutputFormat {}

/// The longest run of digits a constrained reply writes where its format
/// allows it to stop.
pub const MAX_DIGIT_RUN: usize = 16;

/// Compiles formats for one model's vocabulary.
pub struct ConstraintCompiler {
    factory: ParserFactory,
    /// The token llguidance allows where a format is complete.
    end_token: u32,
    words: Arc<Words>,
}

/// What the digit-run bound needs of each token.
struct Words {
    /// Digits the token starts with (0 for none).
    leading_digits: Vec<u8>,
    /// Digits it ends with, and whether it is digits only.
    trailing_digits: Vec<(u8, bool)>,
    /// The most digits any token starts with.
    most_leading_digits: u8,
}

impl ConstraintCompiler {
    /// A compiler for `tokenizer`'s vocabulary, ending replies with `end_token`.
    pub fn new(tokenizer: &TextTokenizer, end_token: u32) -> Result<Self> {
        let words: Vec<Vec<u8>> = tokenizer
            .token_pieces()?
            .into_iter()
            .map(|piece| match piece {
                TokenPiece::Bytes(bytes) => bytes,
                TokenPiece::Special(name) => {
                    let mut word = vec![TokTrie::SPECIAL_TOKEN_MARKER];
                    word.extend_from_slice(name.as_bytes());
                    word
                }
            })
            .collect();
        let digits = |bytes: &mut dyn Iterator<Item = &u8>| bytes.take_while(|b| b.is_ascii_digit()).count() as u8;
        let leading_digits: Vec<u8> = words.iter().map(|w| digits(&mut w.iter())).collect();
        let runs = Words {
            most_leading_digits: leading_digits.iter().copied().max().unwrap_or(0),
            leading_digits,
            trailing_digits: words
                .iter()
                .map(|w| (digits(&mut w.iter().rev()), !w.is_empty() && w.iter().all(u8::is_ascii_digit)))
                .collect(),
        };
        let info = TokRxInfo::new(words.len() as u32, end_token);
        let env = Arc::new(ApproximateTokEnv::new(TokTrie::from(&info, &words)));
        let mut factory = ParserFactory::new_simple(&(env as llguidance::toktrie::TokEnv))?;
        // llguidance's limits bound a compile and each step's mask (a
        // schema needing more is refused with the limit named).
        factory.quiet();
        Ok(Self { factory, end_token, words: Arc::new(runs) })
    }

    /// The constraint for one reply in `format`.
    pub fn compile(&self, format: &OutputFormat) -> Result<Constraint, BadOutputFormat> {
        let grammar = match format {
            OutputFormat::JsonObject => TopLevelGrammar::from_json_schema(readable(json!({"type": "object"}))),
            OutputFormat::JsonSchema(schema) => TopLevelGrammar::from_json_schema(readable(schema.clone())),
            OutputFormat::Lark(source) => TopLevelGrammar::from_lark(source.clone()),
        };
        let parser = self.factory.create_parser(grammar).map_err(|e| BadOutputFormat(format!("{e:#}")))?;
        let matcher = Matcher::new(Ok(parser));
        if let Some(error) = matcher.get_error() {
            return Err(BadOutputFormat(error));
        }
        Ok(Constraint { matcher, end_token: self.end_token, words: self.words.clone(), digit_run: 0 })
    }
}

/// JSON written as people read it (`{"a": 1, "b": [2, 3]}`), with no room
/// for runs of whitespace a small model could loop in. A schema's own
/// `x-guidance` options are kept.
fn readable(schema: Value) -> Value {
    match schema {
        Value::Object(mut fields) => {
            fields.entry("x-guidance").or_insert_with(
                || json!({"whitespace_flexible": false, "item_separator": ", ", "key_separator": ": "}),
            );
            Value::Object(fields)
        }
        // `true`/`false` schemas (anything, nothing) take no options.
        other => other,
    }
}

/// One reply's constraint: which tokens may come next.
pub struct Constraint {
    matcher: Matcher,
    end_token: u32,
    words: Arc<Words>,
    /// Digits the reply ends with so far.
    digit_run: usize,
}

/// A copy goes on alone: llguidance's own `clone` would share the lexer
/// state between the two.
impl Clone for Constraint {
    fn clone(&self) -> Self {
        Self {
            matcher: self.matcher.deep_clone(),
            end_token: self.end_token,
            words: self.words.clone(),
            digit_run: self.digit_run,
        }
    }
}

impl std::fmt::Debug for Constraint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Constraint").field("stopped", &self.matcher.is_stopped()).finish()
    }
}

impl Constraint {
    /// Leaves in `logits` only the tokens the format allows next; the
    /// model's `end_tokens` only where the format is complete.
    pub fn mask(&mut self, logits: &mut [f32], end_tokens: &[u32]) -> Result<()> {
        let allowed = self.matcher.compute_mask_or_eos().map_err(|e| {
            // No token can go on: the format allows nothing here (a schema
            // that refers only to itself, say).
            let first_line = e.to_string().lines().next().unwrap_or_default().to_string();
            BadOutputFormat(format!("no text can continue the reply here ({first_line})"))
        })?;
        let may_end = allowed.is_allowed(self.end_token);
        let is_allowed = |id: u32| {
            if end_tokens.contains(&id) {
                may_end
            } else {
                (id as usize) < allowed.len() && allowed.is_allowed(id)
            }
        };
        let leading = &self.words.leading_digits;
        let too_long = |id: u32| self.digit_run + leading.get(id as usize).map_or(0, |&d| d as usize) > MAX_DIGIT_RUN;
        // The bound applies only where a token could pass it, and where the
        // format leaves another way on.
        let near = self.digit_run + self.words.most_leading_digits as usize > MAX_DIGIT_RUN;
        let bounded = near && (0..logits.len() as u32).any(|id| is_allowed(id) && !too_long(id));
        for (id, logit) in logits.iter_mut().enumerate() {
            let id = id as u32;
            if !is_allowed(id) || (bounded && too_long(id)) {
                *logit = f32::NEG_INFINITY;
            }
        }
        Ok(())
    }

    /// Moves past `token` (one [`Self::mask`] allowed).
    pub fn accept(&mut self, token: u32) -> Result<()> {
        self.matcher.consume_token(token).map_err(|e| anyhow!("constrained decoding failed: {e}"))?;
        let (trailing, all_digits) = self.words.trailing_digits.get(token as usize).copied().unwrap_or((0, false));
        self.digit_run = if all_digits { self.digit_run + trailing as usize } else { trailing as usize };
        Ok(())
    }

    /// Whether the format is complete and allows nothing more.
    pub fn is_finished(&self) -> bool {
        self.matcher.is_stopped()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compiler() -> (TextTokenizer, ConstraintCompiler) {
        let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/tiny/qwen3_scripted");
        let tokenizer = TextTokenizer::from_folder(&fixture).unwrap();
        let end = tokenizer.token_id("<|im_end|>").unwrap();
        let compiler = ConstraintCompiler::new(&tokenizer, end).unwrap();
        (tokenizer, compiler)
    }

    /// Follows `constraint` taking the allowed token with the highest
    /// `preference` each step; the text written (at most 200 tokens).
    fn follow(tokenizer: &TextTokenizer, mut constraint: Constraint, preference: impl Fn(u32) -> f32) -> String {
        let end = tokenizer.token_id("<|im_end|>").unwrap();
        let mut tokens = Vec::new();
        for _ in 0..200 {
            let mut logits: Vec<f32> = (0..tokenizer.token_pieces().unwrap().len() as u32).map(&preference).collect();
            constraint.mask(&mut logits, &[end]).unwrap();
            let best = (0..logits.len()).max_by(|&a, &b| logits[a].total_cmp(&logits[b])).unwrap() as u32;
            if best == end {
                break;
            }
            constraint.accept(best).unwrap();
            tokens.push(best);
            if constraint.is_finished() {
                break;
            }
        }
        tokenizer.decode(&tokens, false).unwrap()
    }

    #[test]
    fn a_model_that_only_wants_digits_still_writes_valid_json_with_bounded_numbers() {
        let (tokenizer, compiler) = compiler();
        let schema = json!({"type": "object", "properties": {"n": {"type": "number"}}, "required": ["n"],
                            "additionalProperties": false});
        let constraint = compiler.compile(&OutputFormat::JsonSchema(schema)).unwrap();
        // Digits first, whatever the format allows after them (but no exponent).
        let digits_first = |id: u32| {
            let text = tokenizer.decode(&[id], false).unwrap();
            match text.as_str() {
                digits if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) => 10.0,
                exponent if exponent.contains(['e', 'E']) => -1000.0,
                _ => -(id as f32) / 1000.0,
            }
        };
        let text = follow(&tokenizer, constraint, digits_first);
        let value: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
        let written = text.split(": ").nth(1).unwrap().trim_end_matches('}');
        let longest_run = written.split(|c: char| !c.is_ascii_digit()).map(str::len).max().unwrap();
        assert_eq!(longest_run, MAX_DIGIT_RUN, "{text}");
        assert!(value["n"].is_number(), "{text}");
    }

    #[test]
    fn unsupported_keywords_are_named_and_impossible_schemas_stop_with_the_formats_fault() {
        let (_, compiler) = compiler();
        let unique = json!({"type": "array", "uniqueItems": true});
        let Err(error) = compiler.compile(&OutputFormat::JsonSchema(unique)) else { panic!("uniqueItems compiled") };
        assert!(error.to_string().contains("uniqueItems"), "{error}");
        let endless = json!({"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/a"}}});
        if let Ok(mut constraint) = compiler.compile(&OutputFormat::JsonSchema(endless)) {
            let error = constraint.mask(&mut [0.0; 8], &[]).unwrap_err();
            assert!(error.downcast_ref::<BadOutputFormat>().is_some(), "{error:#}");
        }
    }
}
