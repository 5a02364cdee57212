//! `cake chat`: a multi-turn conversation in the terminal.
//!
//! Each line typed is a user turn; the reply streams as it is generated and
//! the whole history is re-rendered with the model's chat template for the
//! next turn. `/reset` starts over, `/exit` (or end of input) quits.

use super::{ModelArgs, SamplingArgs};
use crate::text::chat_template::ChatMessage;
use crate::text::generation::{generate_cached, GenerationEvent, GenerationRequest};
use crate::text::prompt_cache::PromptCache;
use crate::text::sampling::SamplingParams;
use anyhow::Result;
use clap::Args;
use std::io::{BufRead, Write};
use std::ops::ControlFlow;

#[derive(Args, Debug)]
pub struct ChatArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// System prompt for the conversation.
    #[arg(long)]
    pub system: Option<String>,
    #[command(flatten)]
    pub sampling: SamplingArgs,
    /// Maximum tokens per reply.
    #[arg(long, default_value_t = 512)]
    pub max_tokens: usize,
}

pub fn run(args: ChatArgs) -> Result<()> {
    eprintln!("loading the model …");
    let (model, load_s) = args.model.load_model()?;
    eprintln!("loaded {} in {load_s:.1} s", model.path.display());
    let template = model.chat_template()?;
    let sampling = args.sampling.resolve(&model);
    let tokenizer = model.tokenizer()?;
    let mut history: Vec<ChatMessage> = args.system.iter().map(|s| ChatMessage::new("system", s)).collect();
    eprintln!("ready: type a message (/reset to start over, /exit to quit)");
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout();
    let mut turn = 0u64;
    // Each turn resends the history: only its new tokens are read again.
    let mut cache = PromptCache::new();
    loop {
        write!(stdout, "\n> ")?;
        stdout.flush()?;
        let mut line = String::new();
        if stdin.lock().read_line(&mut line)? == 0 {
            break;
        }
        let line = line.trim();
        match line {
            "" => continue,
            "/exit" => break,
            "/reset" => {
                history.retain(|m| m.role == "system");
                eprintln!("(conversation cleared)");
                continue;
            }
            _ => {}
        }
        history.push(ChatMessage::new("user", line));
        let written: Vec<&str> = history.iter().map(|m| m.content.as_str()).collect();
        let prompt = tokenizer.encode_chat(&template.render(&history, true)?, &written)?;
        let mut request = GenerationRequest::new(prompt);
        request.max_new_tokens = args.max_tokens;
        request.sampling = SamplingParams { seed: sampling.seed.wrapping_add(turn), ..sampling.clone() };
        turn += 1;
        let result = generate_cached(&model, &request, &mut cache, |event| {
            if let GenerationEvent::Token(token) = event {
                let _ = stdout.write_all(token.text.as_bytes());
                let _ = stdout.flush();
            }
            ControlFlow::Continue(())
        });
        match result {
            Ok(reply) => {
                writeln!(stdout)?;
                eprintln!(
                    "[{} tokens, first token after {:.2} s, {:.1} tokens/s]",
                    reply.tokens.len(),
                    reply.timings.ttft_s,
                    reply.timings.decode_tok_s
                );
                history.push(ChatMessage::new("assistant", reply.text.trim()));
            }
            Err(error) => {
                // Keep the conversation usable: drop the turn that failed.
                history.pop();
                eprintln!("\nerror: {error:#}");
            }
        }
    }
    Ok(())
}
