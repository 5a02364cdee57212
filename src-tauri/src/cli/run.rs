//! `cake run`: generate from a prompt.

use super::{parse_token_list, stopped, ModelArgs, SamplingArgs};
use crate::cluster::machine::describe;
use crate::cluster::master::preview_over;
use crate::cluster::recovery::generate_recovering;
use crate::library::resolve_model;
use crate::models::sources::selection::layer_ranges;
use crate::text::chat_template::{ChatMessage, MessagePart};
use crate::text::generation::{GenerationEvent, GenerationRequest};
use crate::text::model::TextModel;
use crate::text::pictures::{AttachedPicture, PromptPicture};
use crate::text::prompt_cache::PromptCache;
use crate::text::turn_prompt::{spell_turn_pictures, tokenize_turns, turn_pictures};
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
    /// A picture the prompt asks about (PNG, JPEG, WebP or GIF; repeatable),
    /// for models that read pictures; placed before the prompt's text.
    #[arg(long = "image", value_name = "PATH", requires = "prompt")]
    pub images: Vec<std::path::PathBuf>,
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
    /// Show the placement preview and exit without loading: the plans over
    /// the workers found (this machine alone, all, the best subset), each
    /// with its layers, memory, predicted decode speed and time to first
    /// token for a prompt of --plan-prompt tokens, and the one picked
    /// (without a cluster key or workers: this machine alone).
    #[arg(long)]
    pub plan: bool,
    /// Prompt length the preview predicts the time to first token for.
    #[arg(long, default_value_t = 512, requires = "plan")]
    pub plan_prompt: usize,
}

pub fn run(args: RunArgs) -> Result<()> {
    if args.plan {
        return print_preview(&args);
    }
    stopped::say_why_when_stopped()?;
    stopped::doing("loading the model (and looking for workers)");
    let rss_before_load = status_bytes("VmRSS:");
    let (model, load_s) = args.model.load_model()?;
    stopped::doing("reading the prompt");

    let (prompt_tokens, pictures, pictures_s) = prompt_tokens(&model, &args)?;
    let mut request = GenerationRequest::new(prompt_tokens.clone());
    request.pictures = pictures;
    request.max_new_tokens = args.max_tokens;
    request.stop_strings = args.stop.clone();
    request.ignore_eos = args.ignore_eos;
    request.no_kv_cache = args.no_kv_cache;
    request.sampling = args.sampling.resolve(&model);

    let mut stdout = std::io::stdout().lock();
    let mut slot = Some(model);
    let mut cache = PromptCache::new();
    let mut generated = 0usize;
    let reply = generate_recovering(
        &mut slot,
        &request,
        &mut cache,
        &mut |lost| Ok(args.model.load_model_excluding(lost)?.0),
        &mut |lost| {
            eprintln!("\n{lost}; re-planning over the remaining machines");
            stopped::doing(format!("re-planning over the machines left ({lost})"));
        },
        |event| {
            match event {
                GenerationEvent::PromptRead { read, total } => {
                    stopped::doing(format!("reading the prompt ({read} of {total} tokens)"));
                }
                GenerationEvent::Token(token) => {
                    generated += usize::from(token.id.is_some());
                    stopped::doing(format!("generating ({generated} tokens so far)"));
                    if !args.json {
                        let _ = stdout.write_all(token.text.as_bytes());
                        let _ = stdout.flush();
                    }
                }
            }
            ControlFlow::Continue(())
        },
    )?;
    let model = slot.expect("a model after a successful reply");
    cache.clear(&model);
    let generation = reply.last;
    if args.json {
        let out = serde_json::json!({
            "prompt_tokens": prompt_tokens,
            "tokens": reply.tokens,
            "text": reply.text,
            "finish_reason": generation.finish_reason,
            "network_bytes": model.pipeline.network_bytes(),
            "stages": stage_timings(&model),
            "kernels": model.decoder().kernels,
            "gpu": model.decoder().gpu,
            "kv_cache": model.decoder().kv_precision().name(),
            "rss_before_load_bytes": rss_before_load,
            "rss_peak_bytes": status_bytes("VmHWM:"),
            "timings": {
                "load_s": load_s,
                "pictures_s": pictures_s,
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

/// `cake run --plan`: the placement preview, as text or (with --json) JSON.
fn print_preview(args: &RunArgs) -> Result<()> {
    let path = resolve_model(args.model.model.as_deref())?;
    let options = args.model.load_options();
    // Without a cluster key or workers: this machine alone.
    let preview = match args.model.cluster.settings()? {
        Some(settings) => settings.preview(&path, &options, args.plan_prompt)?,
        None => {
            let me = describe("master", args.model.cluster.max_memory, options.gpu);
            let cluster = &args.model.cluster;
            preview_over(&path, &options, &me, &[], cluster.wire, cluster.hidden_route, args.plan_prompt)?
        }
    };
    let mut stdout = std::io::stdout().lock();
    if args.json {
        writeln!(stdout, "{}", serde_json::to_string(&preview)?)?;
        return Ok(());
    }
    for (i, option) in preview.options.iter().enumerate() {
        let mark = if preview.chosen == Some(i) { "→" } else { " " };
        writeln!(stdout, "{mark} {} ({})", option.label, option.machines.join(", "))?;
        if let Some(refused) = &option.refused {
            writeln!(stdout, "    cannot run: {refused}")?;
        }
        if let (Some(plan), Some(prediction)) = (&option.plan, &option.prediction) {
            for stage in plan.stages.iter().filter(|s| !s.layers.is_empty()) {
                let layers = format!("layers {}–{}", stage.layers.start, stage.layers.end - 1);
                let gpu = match stage.gpu_layers.as_slice() {
                    [] => String::new(),
                    on_gpu => format!(
                        "; layers {} on its GPU, {:.1} MB of VRAM",
                        layer_ranges(on_gpu),
                        stage.gpu_memory_bytes as f64 / 1e6
                    ),
                };
                let memory = stage.memory_bytes as f64 / 1e6;
                writeln!(stdout, "    {}: {layers}, {memory:.1} MB of memory{gpu}", stage.node)?;
            }
            writeln!(
                stdout,
                "    predicted: {:.1} tok/s ({:.2} ms per token on links), first token after {} prompt tokens in {:.2} s",
                prediction.decode_tokens_per_second,
                prediction.link_seconds_per_token * 1e3,
                prediction.prompt_tokens,
                prediction.first_token_seconds
            )?;
        }
    }
    writeln!(stdout, "{}", preview.reason)?;
    Ok(())
}

/// A memory figure of this process from Linux's `/proc/self/status`, if
/// the system says: `VmRSS:` (resident now) or `VmHWM:` (the peak). The
/// benchmarks subtract the resident memory before loading from the peak, as
/// they subtract llama.cpp's interpreter and library before its model
/// loads. The peak is read here rather than from the parent's `wait4`,
/// whose figure also counts the parent's own memory at the time it started
/// this process.
fn status_bytes(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    Some(line.split_whitespace().nth(1)?.parse::<u64>().ok()? * 1024)
}

/// The prompt's tokens, the pictures placed in it, and the seconds the
/// vision tower took to read them (`None` without pictures).
fn prompt_tokens(model: &TextModel, args: &RunArgs) -> Result<(Vec<u32>, Vec<PromptPicture>, Option<f64>)> {
    if !args.images.is_empty() {
        stopped::doing("reading the pictures");
    }
    let attached = args.images.iter().map(|path| AttachedPicture::read(path)).collect::<Result<Vec<_>>>()?;
    // The pictures go before the text.
    let mut parts: Vec<MessagePart> = attached.into_iter().map(MessagePart::Picture).collect();
    let mut messages = Vec::new();
    if let Some(system) = &args.system {
        messages.push(ChatMessage::new("system", system));
    }
    let tokens = match (&args.prompt, &args.prompt_tokens) {
        (_, Some(list)) => parse_token_list(list)?,
        (Some(text), None) => {
            parts.push(MessagePart::Text(text.clone()));
            messages.push(ChatMessage::with_parts("user", parts));
            if args.chat {
                let rendered = model.chat_template()?.render(&messages, true)?;
                tokenize_turns(model, &rendered, &messages)?
            } else {
                // A raw prompt: special tokens spelled in it count.
                let turn = &messages[messages.len() - 1].content;
                model.tokenizer()?.encode(&spell_turn_pictures(model, turn, &messages)?, true)?
            }
        }
        (None, None) => bail!("give a prompt with --prompt TEXT or --prompt-tokens 1,2,3"),
    };
    if tokens.is_empty() {
        bail!("the prompt is empty: give at least one token");
    }
    let has_pictures = messages.iter().any(|m| !m.pictures.is_empty());
    if has_pictures {
        stopped::doing("looking at the pictures");
    }
    let started = std::time::Instant::now();
    let pictures = turn_pictures(model, &tokens, &messages)?;
    Ok((tokens, pictures, has_pictures.then(|| started.elapsed().as_secs_f64())))
}

/// Where the time of the layers went: this machine's, and each worker's
/// round trips with the part of them its layers took.
fn stage_timings(model: &TextModel) -> serde_json::Value {
    use std::sync::atomic::Ordering::Relaxed;
    let seconds = |nanos: u64| nanos as f64 / 1e9;
    let own = &model.pipeline.decoder.selection.layers;
    let mut stages = vec![serde_json::json!({
        "node": "master",
        "layers": [own.start, own.end],
        "layers_s": seconds(model.pipeline.local_nanos.load(Relaxed)),
    })];
    for stage in &model.pipeline.remote_stages {
        let timings = stage.worker.timings();
        stages.push(serde_json::json!({
            "node": stage.worker.name(),
            "layers": [stage.layers.start, stage.layers.end],
            "kv_bytes": timings.kv_bytes,
            "forwards": timings.forwards,
            "round_trips_s": seconds(timings.round_trip_nanos),
            "layers_s": seconds(timings.compute_nanos),
        }));
    }
    serde_json::Value::Array(stages)
}
