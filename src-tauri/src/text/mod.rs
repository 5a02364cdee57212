//! Text generation on top of the models: tokenizer, chat templates,
//! sampling, streaming and scoring.

pub mod chat_template;
pub mod constraint;
pub mod content_parts;
pub mod context_fit;
pub mod detokenizer;
pub mod embedding;
pub mod generation;
pub mod logprobs;
pub mod model;
pub mod perplexity;
pub mod pictures;
pub mod prompt_cache;
pub mod python_json;
pub mod reasoning;
pub mod sampling;
pub mod stop_strings;
pub mod tokenizer;
pub mod tool_calls;
pub mod tool_prompt;
pub mod turn_prompt;
