//! The real default model (SmolLM2-135M-Instruct, Q4_1 GGUF) against
//! transformers' float32 outputs in `tests/fixtures/smollm2_reference.json`
//! (written by `generate_smollm2_reference.py`).
//!
//! The model is fetched by `make model` (part of `make test`); without it
//! these tests fail and say so.

mod common;

use cake::text::detokenizer::Detokenizer;
use cake::text::model::{LoadOptions, TextModel};
use common::{cake_json, fixture};
use serde_json::Value;
use std::path::PathBuf;

fn model_path() -> PathBuf {
    let path =
        std::env::var_os("CAKE_TEST_MODEL").map(PathBuf::from).unwrap_or_else(cake::files::paths::default_model_path);
    assert!(
        path.exists(),
        "the default model is missing at {}: run `make model` (or set CAKE_TEST_MODEL)",
        path.display()
    );
    path
}

fn reference() -> Value {
    let text = std::fs::read_to_string(fixture("smollm2_reference.json")).expect("reference file");
    serde_json::from_str(&text).expect("valid JSON")
}

fn ids(value: &Value) -> Vec<u64> {
    value.as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect()
}

fn perplexity_of_english(dtype: Option<&str>) -> (Vec<u64>, f64) {
    let model = model_path();
    let file = fixture("english.txt");
    let mut args = vec!["perplexity", "--model", model.to_str().unwrap(), "--file", file.to_str().unwrap(), "--json"];
    if let Some(d) = dtype {
        args.extend(["--dtype", d]);
    }
    let out = cake_json(&args);
    (ids(&out["tokens"]), out["perplexity"].as_f64().unwrap())
}

#[test]
fn dequantized_greedy_continuations_match_transformers() {
    let model = model_path();
    for case in reference()["prompts"].as_array().unwrap() {
        let prompt = case["prompt"].as_str().unwrap();
        let out = cake_json(&[
            "run",
            "--model",
            model.to_str().unwrap(),
            "--dtype",
            "f32",
            "--prompt",
            prompt,
            "--temperature",
            "0",
            "--max-tokens",
            "32",
            "--ignore-eos",
            "--json",
        ]);
        assert_eq!(ids(&out["prompt_tokens"]), ids(&case["prompt_tokens"]), "tokens of {prompt:?}");
        assert_eq!(out["kv_cache"], "f32", "the exact computation keeps f32 keys and values");
        assert_eq!(
            ids(&out["tokens"]),
            ids(&case["greedy_tokens"]),
            "continuation of {prompt:?}: ours {:?}, transformers {:?}",
            out["text"],
            case["text"]
        );
    }
}

/// The GPU path (`--gpu on`: lavapipe where the machine has no GPU) reads
/// the Q4_1 blocks as stored and multiplies f32 activations: the exact
/// computation, so its greedy tokens are the CPU's exact path's and
/// transformers'. Twelve tokens of the first prompt (lavapipe is slow).
#[test]
fn gpu_greedy_continuation_equals_the_cpus_exact_one_and_transformers() {
    let model = model_path();
    let case = &reference()["prompts"][0];
    let prompt = case["prompt"].as_str().unwrap();
    let run = |gpu: &str| {
        cake_json(&[
            "run",
            "--model",
            model.to_str().unwrap(),
            "--dtype",
            "f32",
            "--prompt",
            prompt,
            "--temperature",
            "0",
            "--max-tokens",
            "12",
            "--ignore-eos",
            "--gpu",
            gpu,
            "--json",
        ])
    };
    let (cpu, gpu) = (run("off"), run("on"));
    assert_eq!(gpu["gpu"]["layers"].as_array().unwrap().len(), 30, "every layer on the GPU: {}", gpu["gpu"]);
    let q4_1 = gpu["kernels"].as_array().unwrap().iter().find(|k| k["stored"] == "Q4_1").cloned();
    assert_eq!(q4_1.map(|k| k["kernel"].clone()), Some(Value::from("gpu wgsl")), "{}", gpu["kernels"]);
    assert_eq!(ids(&gpu["tokens"]), ids(&cpu["tokens"]), "GPU {:?}, CPU {:?}", gpu["text"], cpu["text"]);
    assert_eq!(ids(&gpu["tokens"]), ids(&case["greedy_tokens"])[..12].to_vec());
}

#[test]
fn dequantized_perplexity_within_a_tenth_of_a_percent() {
    let reference = &reference()["perplexity_text"];
    let (tokens, ours) = perplexity_of_english(Some("f32"));
    assert_eq!(tokens, ids(&reference["tokens"]), "tokenization of english.txt");
    let theirs = reference["perplexity"].as_f64().unwrap();
    let relative = (ours - theirs).abs() / theirs;
    assert!(relative < 1e-3, "perplexity {ours} vs transformers {theirs} ({:.4}% off)", relative * 100.0);
}

#[test]
fn quantized_perplexity_within_two_percent_of_f32_reference() {
    let theirs = reference()["perplexity_text"]["perplexity"].as_f64().unwrap();
    let (_, ours) = perplexity_of_english(None);
    let relative = (ours - theirs).abs() / theirs;
    assert!(relative < 0.02, "Q4_1 perplexity {ours} vs transformers f32 {theirs} ({:.2}% off)", relative * 100.0);
}

#[test]
fn quantized_greedy_text_is_sensible() {
    let model = model_path();
    let out = cake_json(&[
        "run",
        "--model",
        model.to_str().unwrap(),
        "--prompt",
        "The capital of France is",
        "--temperature",
        "0",
        "--max-tokens",
        "8",
        "--json",
    ]);
    assert_eq!(out["kv_cache"], "f16", "a quantized model keeps keys and values in f16, as llama.cpp does");
    let text = out["text"].as_str().unwrap();
    assert!(text.contains("Paris"), "Q4_1 continuation of 'The capital of France is': {text:?}");
    // Q4_1 matrices are repacked; the Q8_0 head is read where it lies.
    let kernel_of = |stored: &str| {
        let kernels = out["kernels"].as_array().unwrap();
        let used = kernels.iter().find(|k| k["stored"] == stored).unwrap_or_else(|| panic!("{stored}: {kernels:?}"));
        used["kernel"].as_str().unwrap().to_string()
    };
    let (q4_1, q8_0) = (kernel_of("Q4_1"), kernel_of("Q8_0"));
    assert!(q4_1.starts_with("cake ") && !q4_1.ends_with("in place"), "{q4_1}");
    assert_eq!(q8_0, format!("{q4_1} in place"));
}

#[test]
fn same_seed_gives_same_sampled_text_and_other_seed_differs() {
    let model = model_path();
    let sample = |seed: &str| {
        cake_json(&[
            "run",
            "--model",
            model.to_str().unwrap(),
            "--prompt",
            "Tell me a story about a dragon.",
            "--chat",
            "--temperature",
            "1.0",
            "--top-p",
            "0.95",
            "--seed",
            seed,
            "--max-tokens",
            "24",
            "--ignore-eos",
            "--json",
        ])["tokens"]
            .clone()
    };
    assert_eq!(sample("7"), sample("7"));
    assert_ne!(sample("7"), sample("8"));
}

#[test]
fn chat_prompt_uses_the_models_template() {
    let model = model_path();
    // On the exact (f32) weights: whether this small model stops by itself
    // is a close call, which 4-bit weights with 8-bit activations tip either way.
    let out = cake_json(&[
        "run",
        "--model",
        model.to_str().unwrap(),
        "--prompt",
        "What is 2+2?",
        "--chat",
        "--system",
        "You answer briefly.",
        "--temperature",
        "0",
        "--max-tokens",
        "200",
        "--dtype",
        "f32",
        "--json",
    ]);
    let loaded = TextModel::load(&model, &LoadOptions::default()).unwrap();
    let tokenizer = loaded.tokenizer().unwrap();
    let prompt: Vec<u32> = ids(&out["prompt_tokens"]).into_iter().map(|v| v as u32).collect();
    let rendered = tokenizer.decode(&prompt, false).unwrap();
    assert_eq!(
        rendered,
        "<|im_start|>system\nYou answer briefly.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n"
    );
    // The reply ends at <|im_end|>, the model's end-of-sequence token, which is not shown.
    assert_eq!(out["finish_reason"], "eos", "reply: {:?}", out["text"]);
    assert!(!out["text"].as_str().unwrap().contains("<|im_end|>"));
}

#[test]
fn streamed_text_equals_whole_decode_for_multibyte_text() {
    let model = TextModel::load(&model_path(), &LoadOptions::default()).unwrap();
    let tokenizer = model.tokenizer().unwrap();
    let text = "Crème brûlée 🍰🎂, naïve café — 東京 and Ελληνικά.\n\n  Spaces  and\ttabs.";
    let ids = tokenizer.encode(text, false).unwrap();
    let mut detok = Detokenizer::new(tokenizer, &[]);
    let mut streamed = String::new();
    for &id in &ids {
        let piece = detok.push(id).unwrap();
        assert!(!piece.contains('\u{FFFD}'), "broken UTF-8 emitted: {piece:?}");
        streamed.push_str(&piece);
    }
    streamed.push_str(&detok.finish().unwrap());
    assert_eq!(streamed, tokenizer.decode(&ids, true).unwrap());
    assert_eq!(streamed, text);
}

/// A prompt longer than one prefill piece gives, at every position, the
/// logits the layers give it read whole, to the last bit.
#[test]
fn a_long_prompt_read_in_pieces_equals_it_read_whole() {
    use cake::models::context::PREFILL_CHUNK;
    use cake::models::decoder::LogitsFor;

    let model = TextModel::load(&model_path(), &LoadOptions::default()).unwrap();
    let text = std::fs::read_to_string(fixture("english.txt")).unwrap();
    let once = model.tokenizer().unwrap().encode(&text, false).unwrap();
    let tokens: Vec<u32> = once.iter().cycle().take(PREFILL_CHUNK + 77).copied().collect();
    let in_pieces = model.forward(&tokens, &mut model.new_session(), LogitsFor::All).unwrap();
    let hidden = model.hidden_states(&tokens, &mut model.new_session()).unwrap();
    let whole = model.decoder().logits(&hidden, LogitsFor::All).unwrap();
    assert_eq!(in_pieces.dims(), &[tokens.len(), whole.dim(1).unwrap()]);
    let (a, b) = (in_pieces.to_vec2::<f32>().unwrap(), whole.to_vec2::<f32>().unwrap());
    for (position, (a, b)) in a.iter().zip(&b).enumerate() {
        assert!(a == b, "position {position} differs");
    }
}

/// A prompt longer than one prefill piece reports how far reading is after
/// each piece; stopping there ends the request before any token, and the
/// next request reuses what was read. A context limit below the model's
/// refuses a prompt the model alone would take.
#[test]
fn a_long_prompt_reports_reading_progress_and_can_be_stopped_while_read() {
    use cake::models::context::PREFILL_CHUNK;
    use cake::text::generation::PromptTooLong;
    use cake::text::generation::{generate, generate_cached, FinishReason, GenerationEvent, GenerationRequest};
    use cake::text::prompt_cache::PromptCache;
    use std::ops::ControlFlow;

    let model = TextModel::load(&model_path(), &LoadOptions::default()).unwrap();
    let text = std::fs::read_to_string(fixture("english.txt")).unwrap();
    let once = model.tokenizer().unwrap().encode(&text, false).unwrap();
    let total = 2 * PREFILL_CHUNK + 100;
    let mut request = GenerationRequest::new(once.iter().cycle().take(total).copied().collect());
    request.max_new_tokens = 3;

    let mut reads = Vec::new();
    let whole = generate(&model, &request, |event| {
        if let GenerationEvent::PromptRead { read, total } = event {
            reads.push((read, total));
        }
        ControlFlow::Continue(())
    })
    .unwrap();
    assert_eq!(reads, [(0, total), (PREFILL_CHUNK, total), (2 * PREFILL_CHUNK, total)]);
    assert_eq!(whole.tokens.len(), 3);

    let mut cache = PromptCache::new();
    let stopped = generate_cached(&model, &request, &mut cache, |event| match event {
        GenerationEvent::PromptRead { read, .. } if read == PREFILL_CHUNK => ControlFlow::Break(()),
        _ => ControlFlow::Continue(()),
    })
    .unwrap();
    assert_eq!((stopped.finish_reason, stopped.tokens.len()), (FinishReason::Cancelled, 0));
    let resumed = generate_cached(&model, &request, &mut cache, |_| ControlFlow::Continue(())).unwrap();
    assert_eq!(resumed.cached_prompt_tokens, PREFILL_CHUNK, "the piece read before the stop is kept");
    assert_eq!(resumed.tokens, whole.tokens);
    cache.clear(&model);

    request.context_limit = Some(total - 1);
    let error = generate(&model, &request, |_| ControlFlow::Continue(())).unwrap_err();
    let too_long = error.downcast_ref::<PromptTooLong>().expect("a PromptTooLong");
    assert_eq!((too_long.tokens, too_long.context), (total, total - 1));
}

#[test]
fn stop_string_ends_generation_and_is_not_shown() {
    let model = model_path();
    let run = |extra: &[&str]| {
        let mut args = vec![
            "run",
            "--model",
            model.to_str().unwrap(),
            "--prompt",
            "The capital of France is",
            "--temperature",
            "0",
            "--max-tokens",
            "32",
            "--json",
        ];
        args.extend_from_slice(extra);
        cake_json(&args)
    };
    // Greedy decoding repeats itself: a stop string taken from the middle of
    // the free continuation must end the same continuation where it first appears.
    let free = run(&[])["text"].as_str().unwrap().to_string();
    let chars: Vec<char> = free.chars().collect();
    assert!(chars.len() > 40, "continuation too short to pick a stop string from: {free:?}");
    let stop: String = chars[chars.len() / 2..chars.len() / 2 + 6].iter().collect();
    let shown = &free[..free.find(&stop).unwrap()];
    let out = run(&["--stop", &stop]);
    assert_eq!(out["finish_reason"], "stop_string", "stop {stop:?} in {free:?}");
    assert_eq!(out["text"], shown, "stop {stop:?} in {free:?}");
}

#[test]
fn streamed_stdout_equals_the_json_text() {
    let model = model_path();
    let args = [
        "run",
        "--model",
        model.to_str().unwrap(),
        "--prompt",
        "Once upon a time",
        "--temperature",
        "0",
        "--max-tokens",
        "40",
    ];
    let streamed = common::cake(&args);
    assert!(streamed.status.success());
    let mut json_args = args.to_vec();
    json_args.push("--json");
    let out = cake_json(&json_args);
    let text = String::from_utf8(streamed.stdout).unwrap();
    assert_eq!(text.strip_suffix('\n').unwrap(), out["text"].as_str().unwrap());
}

/// A conversation as the app sends it: each turn resends the history. The
/// kept session must give exactly the tokens a fresh run gives, for greedy
/// and sampled replies, when a turn continues the last one, repeats it
/// (regenerate: the cache is cut back) or edits an earlier message.
/// Bit for bit, on the quantized model: with 8-bit activations a rounding-
/// level difference anywhere (a position read in a prefill or in a decode
/// step, a prompt read whole or in pieces) would flip an activation's
/// rounding now and then and so a token; attention reads every row of a
/// prefill exactly as a decode step would, so none arises.
#[test]
fn continued_conversations_reuse_the_last_session_and_reply_as_fresh_runs_do() {
    use cake::text::chat_template::ChatMessage;
    use cake::text::generation::{generate, generate_cached, GenerationRequest};
    use cake::text::prompt_cache::PromptCache;
    use cake::text::sampling::SamplingParams;
    use std::ops::ControlFlow;

    let model = TextModel::load(&model_path(), &LoadOptions::default()).unwrap();
    let template = model.chat_template().unwrap();
    let tokenizer = model.tokenizer().unwrap();
    let mut cache = PromptCache::new();
    let mut history = vec![ChatMessage::new("system", "You answer in one short sentence.")];
    let turns = [("What is bread made of?", 0.0), ("And butter?", 0.0), ("Which one is older?", 0.9)];
    let mut reused: Vec<(usize, usize)> = Vec::new();
    let ask = |history: &[ChatMessage], temperature: f32, cache: &mut PromptCache| {
        let prompt = tokenizer.encode(&template.render(history, true).unwrap(), false).unwrap();
        let mut request = GenerationRequest::new(prompt);
        request.max_new_tokens = 16;
        request.sampling = SamplingParams { temperature, seed: 7, ..SamplingParams::default() };
        let cached = generate_cached(&model, &request, cache, |_| ControlFlow::Continue(())).unwrap();
        let fresh = generate(&model, &request, |_| ControlFlow::Continue(())).unwrap();
        assert_eq!(cached.tokens, fresh.tokens, "a reused session replies as a fresh one");
        (cached, request.prompt_tokens.len())
    };
    for (question, temperature) in turns {
        history.push(ChatMessage::new("user", question));
        let (reply, prompt_len) = ask(&history, temperature, &mut cache);
        reused.push((reply.cached_prompt_tokens, prompt_len));
        history.push(ChatMessage::new("assistant", &reply.text));
    }
    assert_eq!(reused[0].0, 0, "the first turn has nothing to reuse");
    for turn in 1..reused.len() {
        let ((cached, prompt_len), previous_prompt) = (reused[turn], reused[turn - 1].1);
        assert!(
            cached >= previous_prompt && cached < prompt_len,
            "turn {turn}: {cached} of {prompt_len} prompt tokens reused, the last prompt had {previous_prompt}"
        );
    }
    // Regenerate the last reply: the same prompt again, the cache cut back.
    history.pop();
    let (again, prompt_len) = ask(&history, 0.9, &mut cache);
    assert_eq!(again.cached_prompt_tokens, prompt_len - 1, "all but the last prompt token are reused");
    // Edit the first question: only the system prompt's tokens stay valid.
    history[1] = ChatMessage::new("user", "Name a tree.");
    let (edited, prompt_len) = ask(&history[..2], 0.0, &mut cache);
    assert!(
        edited.cached_prompt_tokens > 0 && edited.cached_prompt_tokens < prompt_len - 4,
        "{} of {prompt_len}",
        edited.cached_prompt_tokens
    );
    cache.clear(&model);
}

/// The tiles the first load writes to the tile cache, and the next load
/// maps from there, give the per-token log-likelihoods of a repack at
/// every load, to the bit.
#[test]
fn tiles_mapped_from_the_cache_score_text_as_a_fresh_repack_does() {
    let model = model_path();
    let file = fixture("english.txt");
    let cache = tempfile::tempdir().unwrap();
    let scores = |tile_cache: &str| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_cake"))
            .args(["perplexity", "--model", model.to_str().unwrap(), "--file", file.to_str().unwrap(), "--json"])
            .env("RAYON_NUM_THREADS", "2")
            .env("CAKE_CACHE_DIR", cache.path())
            .env("CAKE_TILE_CACHE", tile_cache)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let json: Value = serde_json::from_slice(&out.stdout).unwrap();
        json["nll"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect::<Vec<_>>()
    };
    let repacked = scores("off");
    let tiles = || -> usize {
        let folders = std::fs::read_dir(cache.path().join("tiles")).into_iter().flatten().flatten();
        folders
            .flat_map(|f| std::fs::read_dir(f.path()).unwrap().flatten())
            .filter(|f| f.path().extension().is_some_and(|e| e == "tiles"))
            .count()
    };
    assert_eq!(tiles(), 0, "the cache is off");
    assert_eq!(scores("on"), repacked, "first load, writing the tiles");
    let written = tiles();
    assert_eq!(written, 210, "the default model's 210 Q4_1 matrices are cached, its Q8_0 head is read in place");
    assert_eq!(scores("on"), repacked, "second load, mapping the tiles");
    assert_eq!(tiles(), written);
}

/// Several sequences decoded in one batched step get, row by row, the
/// logits each gets stepped alone, to the last bit; streams of different
/// prompt lengths (one read in pieces), budgets and samplers, stepped
/// together, reply as each does alone.
#[test]
fn streams_decoded_together_reply_as_each_alone() {
    use cake::models::context::PREFILL_CHUNK;
    use cake::models::decoder::LogitsFor;
    use cake::text::generation::{generate, step_together, GenerationEvent, GenerationRequest, Phase, Stream};
    use cake::text::prompt_cache::PromptCache;
    use cake::text::sampling::SamplingParams;
    use std::ops::ControlFlow;

    let model = TextModel::load(&model_path(), &LoadOptions::default()).unwrap();
    let tokenizer = model.tokenizer().unwrap();
    let english = tokenizer.encode(&std::fs::read_to_string(fixture("english.txt")).unwrap(), false).unwrap();
    let prompts: Vec<Vec<u32>> = vec![
        tokenizer.encode("The capital of France is", false).unwrap(),
        tokenizer.encode("Bread is made from flour, water and", false).unwrap(),
        english.iter().cycle().take(PREFILL_CHUNK + 40).copied().collect(),
        tokenizer.encode("Once upon a time, in a small village,", false).unwrap(),
    ];

    // One batched step over three prefilled sessions against each alone.
    let mut sessions: Vec<_> = prompts[..3].iter().map(|_| model.new_session()).collect();
    let mut alone_sessions: Vec<_> = prompts[..3].iter().map(|_| model.new_session()).collect();
    for (prompt, (a, b)) in prompts.iter().zip(sessions.iter_mut().zip(alone_sessions.iter_mut())) {
        model.hidden_states(prompt, a).unwrap();
        model.hidden_states(prompt, b).unwrap();
    }
    let next = [11u32, 22, 33];
    let mut refs: Vec<_> = sessions.iter_mut().collect();
    let together = model.forward_streams(&next, &mut refs).unwrap().to_vec2::<f32>().unwrap();
    for (i, session) in alone_sessions.iter_mut().enumerate() {
        let alone = model.forward(&next[i..i + 1], session, LogitsFor::Last).unwrap().to_vec2::<f32>().unwrap();
        assert!(alone[0] == together[i], "row {i} of the batched step differs from its step alone");
    }
    for session in sessions.into_iter().chain(alone_sessions) {
        model.end_session(session);
    }

    let requests: Vec<GenerationRequest> = prompts
        .iter()
        .zip([12, 20, 9, 16])
        .enumerate()
        .map(|(i, (prompt, budget))| {
            let mut request = GenerationRequest::new(prompt.clone());
            request.max_new_tokens = budget;
            request.ignore_eos = true;
            let temperature = if i == 3 { 0.9 } else { 0.0 };
            request.sampling = SamplingParams { temperature, seed: 5, ..SamplingParams::default() };
            request
        })
        .collect();
    let alone: Vec<Vec<u32>> =
        requests.iter().map(|r| generate(&model, r, |_| ControlFlow::Continue(())).unwrap().tokens).collect();

    let mut cache = PromptCache::new();
    let mut streams: Vec<Stream> =
        requests.iter().map(|r| Stream::start(&model, r.clone(), &mut cache).unwrap()).collect();
    let mut together = vec![Vec::new(); streams.len()];
    let mut steps = 0;
    while streams.iter().any(|s| s.phase() != Phase::Finished) {
        for (i, stream) in streams.iter_mut().enumerate() {
            let mut record = |event: GenerationEvent| {
                if let GenerationEvent::Token(token) = event {
                    together[i].extend(token.id);
                }
                ControlFlow::Continue(())
            };
            match stream.phase() {
                Phase::ReadingPrompt => stream.read_prompt_chunk(&mut record).unwrap(),
                Phase::FirstToken => stream.step(&mut record).unwrap(),
                Phase::Decoding | Phase::Finished => {}
            }
        }
        let mut refs: Vec<&mut Stream> = streams.iter_mut().collect();
        step_together(&model, &mut refs, |i, event| {
            if let GenerationEvent::Token(token) = event {
                together[i].extend(token.id);
            }
            ControlFlow::Continue(())
        })
        .unwrap();
        steps += 1;
        assert!(steps < 100, "the streams never finished");
    }
    assert_eq!(together, alone);
}
