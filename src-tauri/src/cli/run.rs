//! `cake run`: generate from a prompt.

use super::{parse_token_list, ModelArgs, SamplingArgs};
use crate::text::chat_template::ChatMessage;
use crate::text::generation::{generate, GenerationRequest};
use crate::cluster::remote::WorkerLost;
use crate::text::model::TextModel;
use anyhow::{bail, Result};
use clap::Args;
use std::io::Write;
use std::ops::ControlFlow;

#[derive(Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// The prompt text.
    #[arg(long, conflicts_with = "prompt_tokens")]
    pub prompt: Option<String>,
    /// The prompt as token ids, e.g. `1,2,3`.
    #[arg(long)]
    pub prompt_tokens: Option<String>,
    /// Wrap the prompt in the model's chat template as a user turn.
    #[arg(long)]
    pub chat: bool,
    /// System prompt (with --chat).
    #[arg(long, requires = "chat")]
    pub system: Option<String>,
    #[command(flatten)]
    pub sampling: SamplingArgs,
    /// Maximum new tokens.
    #[arg(long, default_value_t = 256)]
    pub max_tokens: usize,
    /// Stop when this text appears (repeatable).
    #[arg(long = "stop")]
    pub stop: Vec<String>,
    /// Keep generating past end-of-sequence tokens.
    #[arg(long)]
    pub ignore_eos: bool,
    /// Recompute every step without the KV cache (for checking the cache).
    #[arg(long)]
    pub no_kv_cache: bool,
    /// Print one JSON object instead of streaming text.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: RunArgs) -> Result<()> {
    let (mut model, load_s) = args.model.load_model()?;

    let prompt_tokens = prompt_tokens(&model, &args)?;
    let mut request = GenerationRequest::new(prompt_tokens.clone());
    request.max_new_tokens = args.max_tokens;
    request.stop_strings = args.stop.clone();
    request.ignore_eos = args.ignore_eos;
    request.no_kv_cache = args.no_kv_cache;
    request.sampling = args.sampling.resolve(&model);

    let mut stdout = std::io::stdout().lock();
    // Tokens and text of attempts that a lost worker cut short.
    let mut earlier_tokens: Vec<u32> = Vec::new();
    let mut earlier_text = String::new();
    let mut lost_workers: Vec<String> = Vec::new();
    let generation = loop {
        let mut attempt = request.clone();
        attempt.prompt_tokens = [prompt_tokens.as_slice(), &earlier_tokens].concat();
        attempt.max_new_tokens = request.max_new_tokens - earlier_tokens.len();
        let mut attempt_tokens = Vec::new();
        let mut attempt_text = String::new();
        let result = generate(&model, &attempt, |event| {
            attempt_tokens.extend(event.id);
            attempt_text.push_str(event.text);
            if !args.json {
                let _ = stdout.write_all(event.text.as_bytes());
                let _ = stdout.flush();
            }
            ControlFlow::Continue(())
        });
        match result {
            Ok(generation) => break generation,
            Err(error) => {
                let Some(lost) = error.downcast_ref::<WorkerLost>() else {
                    return Err(error);
                };
                // Re-plan over the machines that are left and continue from
                // the prompt plus what was generated so far.
                eprintln!("\n{lost}; re-planning over the remaining machines");
                lost_workers.push(lost.address.clone());
                earlier_tokens.extend(attempt_tokens);
                earlier_text.push_str(&attempt_text);
                drop(model);
                model = args.model.load_model_excluding(&lost_workers)?.0;
            }
        }
    };
    if args.json {
        let tokens = [earlier_tokens.as_slice(), &generation.tokens].concat();
        let text = earlier_text + &generation.text;
        let out = serde_json::json!({
            "prompt_tokens": prompt_tokens,
            "tokens": tokens,
            "text": text,
            "finish_reason": generation.finish_reason,
            "network_bytes": model.network_bytes(),
            "timings": {
                "load_s": load_s,
                "ttft_s": generation.timings.ttft_s,
                "prompt_tok_s": generation.timings.prompt_tok_s,
                "decode_tok_s": generation.timings.decode_tok_s,
            },
        });
        writeln!(stdout, "{out}")?;
    } else {
        writeln!(stdout)?;
    }
    Ok(())
}

fn prompt_tokens(model: &TextModel, args: &RunArgs) -> Result<Vec<u32>> {
    let tokens = match (&args.prompt, &args.prompt_tokens) {
        (_, Some(list)) => parse_token_list(list)?,
        (Some(text), None) if args.chat => {
            let mut messages = Vec::new();
            if let Some(system) = &args.system {
                messages.push(ChatMessage::new("system", system));
            }
            messages.push(ChatMessage::new("user", text));
            let rendered = model.chat_template()?.render(&messages, true)?;
            model.tokenizer()?.encode(&rendered, false)?
        }
        (Some(text), None) => model.tokenizer()?.encode(text, true)?,
        (None, None) => bail!("give a prompt with --prompt TEXT or --prompt-tokens 1,2,3"),
    };
    if tokens.is_empty() {
        bail!("the prompt is empty: give at least one token");
    }
    Ok(tokens)
}
