//! Vision towers against transformers on tiny random checkpoints in the
//! released layouts (tests/fixtures/generate_tiny_vision.py).

mod common;

use base64::Engine;
use cake::images::pixels::{pixel_values, Normalization};
use cake::images::resize::{resize, Filter};
use cake::models::decoder::LogitsFor;
use cake::models::gpu_offload::{GpuMode, GpuRequest};
use cake::models::vision::gemma3_projector::Gemma3Projector;
use cake::models::vision::siglip::{SiglipConfig, SiglipVision};
use cake::models::vision::smolvlm::SmolVlmVision;
use cake::models::vision::tensors::Tensors;
use cake::text::chat_template::{ChatMessage, MessagePart, RenderOptions};
use cake::text::generation::{generate, generate_cached, GenerationRequest};
use cake::text::model::{LoadOptions, TextModel};
use cake::text::pictures::AttachedPicture;
use cake::text::prompt_cache::PromptCache;
use cake::text::sampling::SamplingParams;
use cake::text::tokenizer::TextTokenizer;
use cake::text::turn_prompt::{pictures_in, tokenize_turns, turn_pictures};
use common::{cake_error, cake_json, computed_picture};
use serde_json::Value;
use std::ops::ControlFlow;
use std::path::PathBuf;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures").join(name)
}

/// The tiny Gemma 3's reference.json.
fn reference() -> Value {
    let path = fixture("tiny/gemma3_vision/reference.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// A float32 array of reference.json: its shape and values.
fn array(value: &Value) -> (Vec<usize>, Vec<f32>) {
    let shape = value["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect();
    let bytes = base64::engine::general_purpose::STANDARD.decode(value["f32"].as_str().unwrap()).unwrap();
    (shape, bytes.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect())
}

/// The largest difference between `ours` and `expected`, relative to the
/// largest expected magnitude.
fn relative_error(ours: &[f32], expected: &[f32]) -> f32 {
    assert_eq!(ours.len(), expected.len());
    let scale = expected.iter().fold(0f32, |m, v| m.max(v.abs()));
    ours.iter().zip(expected).fold(0f32, |m, (a, b)| m.max((a - b).abs())) / scale
}

/// Gemma 3: the processor's pixel values bit for bit, the SigLIP tower's
/// last hidden state and the projector's soft tokens within 2e-6 of the
/// largest value of transformers' (float32 both).
#[test]
fn gemma3_vision_tower_matches_transformers() {
    let folder = fixture("tiny/gemma3_vision");
    let config: Value = serde_json::from_str(&std::fs::read_to_string(folder.join("config.json")).unwrap()).unwrap();
    let reference = reference();
    let vision: SiglipConfig = serde_json::from_value(config["vision_config"].clone()).unwrap();
    let size = vision.image_size as u32;
    let picture = computed_picture(90, 30);
    let pixels = pixel_values(&resize(&picture, size, size, Filter::Bilinear), &Normalization::HALF);
    let (shape, expected_pixels) = array(&reference["pixel_values"]);
    assert_eq!(shape, [3, vision.image_size, vision.image_size]);
    assert!(pixels.iter().zip(&expected_pixels).all(|(a, b)| a.to_bits() == b.to_bits()), "pixel values differ");

    let tensors = Tensors::open(&folder, &["vision_tower.", "multi_modal_projector."]).unwrap();
    let eps = vision.layer_norm_eps;
    let side = vision.patches_per_side();
    let tower = SiglipVision::load(vision, &tensors, "vision_tower.vision_model").unwrap();
    let hidden = tower.forward(&pixels).unwrap();
    let (_, expected_hidden) = array(&reference["vision_hidden"]);
    let ours: Vec<f32> = hidden.flatten_all().unwrap().to_vec1().unwrap();
    let error = relative_error(&ours, &expected_hidden);
    // 4e-7 here; tanh-GELU swapped for erf-GELU gives 5e-6.
    assert!(error < 2e-6, "vision hidden states differ by {error}");

    let tokens = config["mm_tokens_per_image"].as_u64().unwrap() as usize;
    let projector = Gemma3Projector::load(&tensors, side, tokens, eps).unwrap();
    let features = projector.forward(&hidden).unwrap();
    let (shape, expected_features) = array(&reference["image_features"]);
    assert_eq!(features.dims(), shape.as_slice());
    let ours: Vec<f32> = features.flatten_all().unwrap().to_vec1().unwrap();
    let error = relative_error(&ours, &expected_features);
    assert!(error < 2e-6, "image features differ by {error}");
}

fn ids(value: &Value) -> Vec<u32> {
    value.as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as u32).collect()
}

/// The computed picture of `[width, height]`, as a prompt attaches it.
fn attached(shape: &Value) -> AttachedPicture {
    let side = |i: usize| shape[i].as_u64().unwrap() as u32;
    let image = computed_picture(side(0), side(1));
    // The digest only tells pictures apart here.
    let mut digest = [0u8; 32];
    digest[..8].copy_from_slice(&(u64::from(side(0)) << 32 | u64::from(side(1))).to_le_bytes());
    AttachedPicture::new(image, digest)
}

/// Gemma 3's processor on a wide, a tall and a square picture: its pixel
/// values bit for bit.
#[test]
fn gemma3_pixel_values_match_the_processor_for_every_shape() {
    let reference = reference();
    let cases = reference["pixel_values_by_shape"].as_array().unwrap();
    assert_eq!(cases.len(), 3);
    for case in cases {
        let picture = attached(&case["picture"]).image().unwrap().into_owned();
        let pixels = pixel_values(&resize(&picture, 56, 56, Filter::Bilinear), &Normalization::HALF);
        let (_, expected) = array(&case["pixel_values"]);
        assert!(pixels.iter().zip(&expected).all(|(a, b)| a.to_bits() == b.to_bits()), "{}", case["picture"]);
    }
}

/// Gemma 3's text model over a prompt holding two pictures, longer than its
/// sliding window: each position's negative log-likelihood of the next id
/// within 1e-3 of transformers', the likeliest id at every position and
/// the greedy reply equal; and a follow-up with the same pictures reuses
/// the cached prompt and answers as a fresh reading does, while another
/// picture in the same place is not taken from the cache.
#[test]
fn gemma3_prompt_with_pictures_matches_transformers() {
    check_prompt_with_pictures(&fixture("tiny/gemma3_vision"), &reference()["prompt"], GpuRequest::default());
}

/// The same with every layer on the GPU (lavapipe where there is none):
/// the GPU's attention lets a picture's tokens see each other.
#[test]
fn gemma3_prompt_with_pictures_on_the_gpu_matches_transformers() {
    let gpu = GpuRequest { mode: GpuMode::On, ..Default::default() };
    check_prompt_with_pictures(&fixture("tiny/gemma3_vision"), &reference()["prompt"], gpu);
}

/// The same checkpoint as llama.cpp's converter writes it: the text model's
/// GGUF, and beside it the picture reader's mmproj GGUF (found there, its
/// norm's added 1 taken off), against transformers with the projection
/// rounded to 16-bit floats as the converter stores it.
#[test]
fn gemma3_gguf_with_its_mmproj_matches_transformers() {
    let folder = fixture("tiny/gemma3_vision");
    let model = TextModel::load(&folder.join("model-f32.gguf"), &LoadOptions::default()).unwrap();
    let vision = model.vision.as_ref().expect("the mmproj file beside the GGUF is its picture reader");
    let all = reference();
    let reference = &all["f16_projection"];
    let features = vision.encode(&computed_picture(90, 30)).unwrap();
    let (shape, expected) = array(&reference["image_features"]);
    assert_eq!(features.dims(), shape.as_slice());
    let error = relative_error(&features.flatten_all().unwrap().to_vec1().unwrap(), &expected);
    assert!(error < 2e-6, "image features differ by {error}");
    drop(model);
    check_prompt_with_pictures(&folder.join("model-f32.gguf"), &reference["prompt"], GpuRequest::default());
}

/// A file named as a picture reader beside a GGUF model that cannot serve
/// as one: the model reads text, and asking it to read a picture says which
/// file failed and why; a usable one beside it is taken instead.
#[test]
fn a_picture_reader_that_cannot_serve_says_why() {
    let folder = fixture("tiny/gemma3_vision");
    let dir = tempfile::tempdir().unwrap();
    let model_path = dir.path().join("model-f32.gguf");
    std::fs::copy(folder.join("model-f32.gguf"), &model_path).unwrap();
    // A text model's GGUF under an mmproj name.
    std::fs::copy(fixture("tiny/gemma3_gguf/model-f32.gguf"), dir.path().join("mmproj-Q8_0.gguf")).unwrap();
    let model = TextModel::load(&model_path, &LoadOptions::default()).unwrap();
    let why = format!("{:#}", model.vision().err().expect("no picture reader"));
    assert!(why.contains("mmproj-Q8_0.gguf: not a picture reader (mmproj) file"), "{why}");
    assert!(why.contains("did not load"), "{why}");
    drop(model);

    std::fs::copy(folder.join("mmproj-f32.gguf"), dir.path().join("mmproj-F16.gguf")).unwrap();
    let model = TextModel::load(&model_path, &LoadOptions::default()).unwrap();
    assert!(model.vision().is_ok(), "the usable picture reader is taken");
}

/// `--mmproj PATH` names the picture reader of a GGUF model kept
/// elsewhere: `cake run --image` then gives Gemma3Processor's prompt ids;
/// without it the model reads text only, and says so; a model folder
/// refuses one.
#[test]
fn an_mmproj_named_on_the_command_line_reads_the_pictures() {
    let folder = fixture("tiny/gemma3_vision");
    let chat = &reference()["chat"];
    let (models, readers) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let model = models.path().join("model-f32.gguf");
    let reader = readers.path().join("gemma3-vision-reader.gguf");
    std::fs::copy(folder.join("model-f32.gguf"), &model).unwrap();
    std::fs::copy(folder.join("mmproj-f32.gguf"), &reader).unwrap();
    let picture = folder.join(chat["picture"].as_str().unwrap());
    let run = |model: &std::path::Path, reader: Option<&std::path::Path>| {
        let mut args = vec!["run", "--model", model.to_str().unwrap(), "--chat", "--image", picture.to_str().unwrap()];
        args.extend(["--prompt", chat["question"].as_str().unwrap(), "--max-tokens", "1", "--json"]);
        if let Some(reader) = reader {
            args.extend(["--mmproj", reader.to_str().unwrap()]);
        }
        args.into_iter().map(String::from).collect::<Vec<_>>()
    };
    let args = run(&model, Some(&reader));
    let out = cake_json(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(ids(&out["prompt_tokens"]), ids(&chat["ids"]));
    let args = run(&model, None);
    let error = cake_error(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(error.contains("reads text only"), "{error}");
    let args = run(&folder, Some(&reader));
    let error = cake_error(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(error.contains("an mmproj picture reader goes with a GGUF model"), "{error}");
}

/// The checks above on the model at `path`, against transformers' `prompt`.
fn check_prompt_with_pictures(path: &std::path::Path, prompt: &Value, gpu: GpuRequest) {
    let on_gpu = gpu.mode == GpuMode::On;
    let model = TextModel::load(path, &LoadOptions { gpu, ..Default::default() }).unwrap();
    if on_gpu {
        assert_eq!(
            model.decoder().gpu.layers.len(),
            model.decoder().config.num_hidden_layers(),
            "every layer on the GPU"
        );
    }
    assert!(model.vision.is_some(), "a Gemma 3 checkpoint with a vision tower reads pictures");
    let tokens = ids(&prompt["ids"]);
    let pictures: Vec<AttachedPicture> = prompt["pictures"].as_array().unwrap().iter().map(attached).collect();
    let attached: Vec<&AttachedPicture> = pictures.iter().collect();
    let placed = pictures_in(&model, &tokens, &attached).unwrap();
    assert_eq!(placed.iter().map(|p| p.positions()).collect::<Vec<_>>(), [5..9, 18..22]);

    let mut session = model.new_session();
    let logits = model.forward_with(&tokens, 0, &placed, &mut session, LogitsFor::All).unwrap();
    model.end_session(session);
    let logits: Vec<Vec<f32>> = logits.to_vec2().unwrap();
    check_logits("the two-picture prompt", &logits, &tokens, prompt);

    let mut request = GenerationRequest::new(tokens.clone());
    request.pictures = placed;
    request.max_new_tokens = 8;
    request.ignore_eos = true;
    request.sampling = SamplingParams { temperature: 0.0, ..Default::default() };
    let mut cache = PromptCache::new();
    let mut run = |request: &GenerationRequest| {
        generate_cached(&model, request, &mut cache, |_| ControlFlow::Continue(())).unwrap()
    };
    let first = run(&request);
    assert_eq!(first.tokens, ids(&prompt["greedy"]));
    // A follow-up holding the reply continues the cached prompt, pictures
    // included, and answers as a fresh reading would.
    let mut follow_up = request.clone();
    follow_up.prompt_tokens = [tokens.clone(), first.tokens.clone(), vec![61, 19, 7]].concat();
    let continued = run(&follow_up);
    assert_eq!(continued.cached_prompt_tokens, tokens.len() + first.tokens.len() - 1);
    let fresh = generate(&model, &follow_up, |_| ControlFlow::Continue(())).unwrap();
    assert_eq!(continued.tokens, fresh.tokens);
    // Another second picture in the same place: nothing from it on is reused.
    let mut other = follow_up.clone();
    other.pictures[1].digest = [7; 32];
    assert!(run(&other).cached_prompt_tokens <= 18, "a changed picture was taken from the cache");
}

/// `cake run --chat --image picture.png --prompt …` on the tiny Gemma 3
/// with its tokenizer: the prompt ids Gemma3Processor makes of the same
/// turn, and the greedy reply of transformers' `generate`; from the GGUF
/// file (its vocabulary converted by llama.cpp, its mmproj file beside
/// it) the same prompt ids.
#[test]
fn cake_run_with_an_image_matches_the_processor_and_generate() {
    let folder = fixture("tiny/gemma3_vision");
    let reference = reference();
    let chat = &reference["chat"];
    let picture = folder.join(chat["picture"].as_str().unwrap());
    let gguf = folder.join("model-f32.gguf");
    let question = chat["question"].as_str().unwrap();
    let run_model = |model: &std::path::Path, picture: &str| chat_run_args(model, picture, question);
    let run = |picture: &str| run_model(&folder, picture);
    let args = run(picture.to_str().unwrap());
    let out = cake_json(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(ids(&out["prompt_tokens"]), ids(&chat["ids"]));
    assert_eq!(ids(&out["tokens"]), ids(&chat["greedy"]));
    let args = run_model(&gguf, picture.to_str().unwrap());
    let out = cake_json(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(ids(&out["prompt_tokens"]), ids(&chat["ids"]), "from the GGUF files");

    // Not a picture: refused, naming the file.
    let dir = tempfile::tempdir().unwrap();
    let fake = dir.path().join("notes.png");
    std::fs::write(&fake, "these are words, not pixels").unwrap();
    let args = run(fake.to_str().unwrap());
    let error = cake_error(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(error.contains("notes.png: not a PNG, JPEG, WebP or GIF picture"), "{error}");
}

fn smolvlm() -> (SmolVlmVision, Value) {
    let folder = fixture("tiny/smolvlm");
    let read =
        |name: &str| -> Value { serde_json::from_str(&std::fs::read_to_string(folder.join(name)).unwrap()).unwrap() };
    let tokenizer = TextTokenizer::from_folder(&folder).unwrap();
    (SmolVlmVision::load(&folder, &read("config.json"), &tokenizer).unwrap(), read("reference.json"))
}

/// SmolVLM's processor on a wide, a tall, a square and a larger picture:
/// the rows and columns of tiles and every tile's pixel values bit for bit
/// (the SHA-256 of transformers' float32 values; each tile's sum tells
/// which one differs).
#[test]
fn smolvlm_tiles_match_the_processor_for_every_shape() {
    use sha2::{Digest, Sha256};
    let (vision, reference) = smolvlm();
    let cases = reference["pixel_values_by_shape"].as_array().unwrap();
    assert_eq!(cases.len(), 4);
    for case in cases {
        let shape = &case["picture"];
        let picture = computed_picture(shape[0].as_u64().unwrap() as u32, shape[1].as_u64().unwrap() as u32);
        let tiles = vision.tiling().tiles(&picture);
        let count = |key: &str| case[key].as_u64().unwrap() as usize;
        assert_eq!(
            (tiles.rows, tiles.cols, tiles.tiles.len()),
            (count("rows"), count("cols"), count("tiles")),
            "{shape}"
        );
        let values: Vec<Vec<f32>> =
            tiles.tiles.iter().map(|tile| pixel_values(tile, &vision.tiling().normalization)).collect();
        for (i, (tile, expected)) in values.iter().zip(case["tile_sums"].as_array().unwrap()).enumerate() {
            let sum: f64 = tile.iter().map(|&v| f64::from(v)).sum();
            assert!((sum - expected.as_f64().unwrap()).abs() < 1e-6, "{shape} tile {i}: sum {sum} against {expected}");
        }
        let bytes: Vec<u8> = values.iter().flatten().flat_map(|v| v.to_le_bytes()).collect();
        let digest: String = Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(digest, case["sha256"].as_str().unwrap(), "{shape}");
    }
}

/// SmolVLM's tower (SigLIP over a 6 × 6 patch grid) and
/// connector (pixel shuffle by 3, projection) on every tile of the wide
/// picture: the tower's last hidden state and the tokens within 2e-6 of
/// the largest value of transformers'.
#[test]
fn smolvlm_vision_tower_matches_transformers() {
    let (vision, reference) = smolvlm();
    let tiles = vision.tiling().tiles(&computed_picture(90, 30));
    let hidden: Vec<f32> = tiles
        .tiles
        .iter()
        .flat_map(|tile| vision.tower_features(tile).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap())
        .collect();
    let (shape, expected) = array(&reference["vision_hidden"]);
    assert_eq!(shape[0], tiles.tiles.len());
    let error = relative_error(&hidden, &expected);
    assert!(error < 2e-6, "vision hidden states differ by {error}");
    let tokens: Vec<f32> = tiles
        .tiles
        .iter()
        .flat_map(|tile| vision.encode_tile(tile).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap())
        .collect();
    let (shape, expected) = array(&reference["image_features"]);
    assert_eq!(shape, [tiles.tiles.len() * 4, vision.output_width()]);
    let error = relative_error(&tokens, &expected);
    assert!(error < 2e-6, "image features differ by {error}");
}

/// SmolVLM's text model (a Llama under `model.text_model.`) loads from the
/// folder: each position's NLL of a prompt without pictures within 1e-3 of
/// transformers'.
#[test]
fn smolvlm_text_model_matches_transformers() {
    let (_, reference) = smolvlm();
    let text = &reference["text"];
    let model = TextModel::load(&fixture("tiny/smolvlm"), &LoadOptions::default()).unwrap();
    let tokens = ids(&text["ids"]);
    let mut session = model.new_session();
    let logits: Vec<Vec<f32>> = model.forward(&tokens, &mut session, LogitsFor::All).unwrap().to_vec2().unwrap();
    model.end_session(session);
    check_nll("a prompt without pictures", &logits, &tokens, &text["nll"]);
}

/// A user turn holding a wide picture after the question, a tall one or a
/// square one before it, through SmolVLM's released chat template (which
/// reads content only as typed parts), on SmolVLM2's design and on
/// SmolVLM-256M's (Idefics3): the prompt ids the processor makes (each
/// picture's tiles spelled by row and column, then the whole picture),
/// each position's NLL within 1e-3 of transformers', the argmax at every
/// position and the greedy reply equal; `cake run --chat --image` gives the
/// same prompt ids and reply. The same from llama.cpp's GGUF files of the
/// Idefics3 model (the text model, and the `idefics3` mmproj beside it).
#[test]
fn smolvlm_prompts_with_pictures_match_the_processor_and_transformers() {
    for family in ["tiny/smolvlm", "tiny/idefics3"] {
        check_smolvlm_prompts(&fixture(family), &fixture(family));
    }
    let folder = fixture("tiny/idefics3");
    check_smolvlm_prompts(&folder, &folder.join("model-f32.gguf"));
}

/// The checks above on the model at `path`, against the `chats` of the
/// reference in `folder`.
fn check_smolvlm_prompts(folder: &std::path::Path, path: &std::path::Path) {
    let reference: Value =
        serde_json::from_str(&std::fs::read_to_string(folder.join("reference.json")).unwrap()).unwrap();
    let model = TextModel::load(path, &LoadOptions::default()).unwrap();
    let template = model.chat_template().unwrap();
    for chat in reference["chats"].as_array().unwrap() {
        let name = format!("{} {}", path.display(), chat["picture"].as_str().unwrap());
        let picture_file = folder.join(chat["picture"].as_str().unwrap());
        let picture = MessagePart::Picture(AttachedPicture::read(&picture_file).unwrap());
        let question = MessagePart::Text(chat["question"].as_str().unwrap().to_string());
        let parts = if chat["picture_first"].as_bool().unwrap() { [picture, question] } else { [question, picture] };
        let messages = [ChatMessage::with_parts("user", parts.into())];
        let rendered = template.render_prompt(&messages, &RenderOptions::default()).unwrap();
        let tokens = tokenize_turns(&model, &rendered, &messages).unwrap();
        assert_eq!(tokens, ids(&chat["ids"]), "{name}: prompt ids");
        let placed = turn_pictures(&model, &tokens, &messages).unwrap();
        let tiles = placed.len();
        assert!(tiles > 2 && placed.iter().all(|p| p.embeddings.dim(0).unwrap() == 4), "{name}: {tiles} tiles");

        let mut session = model.new_session();
        let logits = model.forward_with(&tokens, 0, &placed, &mut session, LogitsFor::All).unwrap();
        model.end_session(session);
        let logits: Vec<Vec<f32>> = logits.to_vec2().unwrap();
        check_logits(&name, &logits, &tokens, chat);

        // transformers' reply stops at the config's end token: compared as far as it goes.
        let greedy = ids(&chat["greedy"]);
        let mut request = GenerationRequest::new(tokens);
        request.pictures = placed;
        request.max_new_tokens = 8;
        request.ignore_eos = true;
        request.sampling = SamplingParams { temperature: 0.0, ..Default::default() };
        let reply = generate(&model, &request, |_| ControlFlow::Continue(())).unwrap();
        assert_eq!(reply.tokens[..greedy.len()], greedy, "{name}: greedy reply");
        if !chat["picture_first"].as_bool().unwrap() {
            continue;
        }
        // `cake run` puts the picture before the question.
        let question = chat["question"].as_str().unwrap();
        let args = chat_run_args(path, picture_file.to_str().unwrap(), question);
        let out = cake_json(&args.iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(ids(&out["prompt_tokens"]), ids(&chat["ids"]), "cake run {name}: prompt ids");
        assert_eq!(ids(&out["tokens"])[..greedy.len()], greedy, "cake run {name}: greedy reply");
        let reading = out["timings"]["pictures_s"].as_f64().expect("the time the pictures took");
        assert!(reading > 0.0 && reading < 60.0, "cake run {name}: pictures read in {reading} s");
    }
}

/// `cake run` arguments for the greedy 8-token reply (end tokens ignored)
/// of the model at `model` to a chat turn holding `picture` and `question`.
fn chat_run_args(model: &std::path::Path, picture: &str, question: &str) -> Vec<String> {
    let model = model.to_str().unwrap();
    [
        "run",
        "--model",
        model,
        "--chat",
        "--image",
        picture,
        "--prompt",
        question,
        "--temperature",
        "0",
        "--max-tokens",
        "8",
        "--ignore-eos",
        "--dtype",
        "f32",
        "--json",
    ]
    .into_iter()
    .map(String::from)
    .collect()
}

/// Each position's NLL of the next of `tokens` from `logits` within 1e-3
/// of the reference's `nll`, and the likeliest ids its `argmax`.
fn check_logits(name: &str, logits: &[Vec<f32>], tokens: &[u32], reference: &Value) {
    check_nll(name, logits, tokens, &reference["nll"]);
    let argmax: Vec<u32> = logits
        .iter()
        .map(|row| {
            row.iter().enumerate().fold((0, f32::NEG_INFINITY), |b, (i, &v)| if v > b.1 { (i, v) } else { b }).0 as u32
        })
        .collect();
    assert_eq!(argmax, ids(&reference["argmax"]), "{name}: likeliest ids");
}

/// Each position's NLL of the next of `tokens` from `logits` within 1e-3
/// of `expected`.
fn check_nll(name: &str, logits: &[Vec<f32>], tokens: &[u32], expected: &Value) {
    for (position, (row, expected)) in logits.iter().zip(expected.as_array().unwrap()).enumerate() {
        let max = row.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
        let log_sum = row.iter().map(|&v| f64::from(v - max).exp()).sum::<f64>().ln() + f64::from(max);
        let nll = log_sum - f64::from(row[tokens[position + 1] as usize]);
        let expected = expected.as_f64().unwrap();
        assert!((nll - expected).abs() < 1e-3, "{name} position {position}: NLL {nll} against {expected}");
    }
}
