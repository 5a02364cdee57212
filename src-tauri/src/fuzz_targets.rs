//! The readers of untrusted bytes, as the fuzzers drive them.
//!
//! Each function takes arbitrary bytes and passes them through one reader
//! the way Cake's own code does, ignoring the verdict: refusing the input
//! is correct, and only a panic, a hang or a huge allocation is a bug. The
//! `cake-fuzz` crate (`fuzz/`, run with `make fuzz`) calls these under
//! libFuzzer; `tests/fuzz_regressions.rs` replays every input that once
//! failed, without the fuzzer, in `make test`.

use crate::cluster::protocol::WireFormat;
use crate::cluster::protocol::{check_hidden_shape, decode, tensor_from_bytes, Request, Response};
use crate::cluster::remote::plausible;
use crate::cluster::weight_transfer::{unpack_chunk, FileManifest, ModelManifest, Piece, MOST_MANIFESTS_SENT};
use crate::cluster::worker::{load_stage, run_step};
use crate::formats::gguf_header;
use crate::formats::safetensors::SafetensorsHeader;
use crate::formats::torch_pickle::unpickle;
use crate::images::decode::{self as picture_decode, ImageLimits};
use crate::images::pixels::{pixel_values, Normalization};
use crate::images::resize::{resize, Filter};
use crate::speech::voice_prompt::VoicePrompt;
use crate::text::chat_template::{ChatMessage, ChatTemplate};
use candle_core::Device;
use std::path::Path;

/// One fuzz target: arbitrary bytes in, nothing out.
pub type Target = fn(&[u8]);

/// The fuzz targets by name, for `make fuzz` and the regression replay.
pub const TARGETS: [(&str, Target); 9] = [
    ("cluster_message", cluster_message),
    ("master_load", master_load),
    ("worker_step", worker_step),
    ("gguf_header", gguf_header),
    ("safetensors_header", safetensors_header),
    ("wav", wav),
    ("chat_template", chat_template),
    ("torch_pickle", torch_pickle),
    ("picture", picture),
];

/// A decrypted frame, read as a worker reads a master's request and as a
/// master reads a worker's answer, with the checks each side then makes.
pub fn cluster_message(frame: &[u8]) {
    if let Ok((request, payload)) = decode::<Request>(frame) {
        match request {
            Request::Load { manifest, .. } if manifest.validate().is_ok() => {
                if let Some(&first) = manifest.chunks().first() {
                    let _ = unpack_chunk(&manifest, first, "", payload);
                }
            }
            Request::Forward { shape, format, .. } if check_hidden_shape(&shape, 8, 0, 64).is_ok() => {
                let _ = tensor_from_bytes(&shape, format, payload, &Device::Cpu);
            }
            _ => {}
        }
    }
    if let Ok((response, payload)) = decode::<Response>(frame) {
        match response {
            Response::Info(info) => {
                let _ = plausible(info, "fuzz");
            }
            Response::Hidden { shape, format, .. } => {
                let _ = tensor_from_bytes(&shape, format, payload, &Device::Cpu);
            }
            _ => {}
        }
    }
}

/// A worker's answers to a master's `Load`, as the master takes them:
/// whatever chunks a worker asks for, over the rounds a load allows, the
/// master sends only chunks its manifest lists, each at most once a round,
/// and at most [`MOST_MANIFESTS_SENT`] manifests in all.
pub fn master_load(answers: &[u8]) {
    let piece = |offset, len| Piece { offset, len };
    let manifest = ModelManifest {
        key: "ab".repeat(32),
        gguf: false,
        files: vec![
            FileManifest { name: "config.json".into(), len: 700, pieces: vec![piece(0, 700)] },
            FileManifest {
                name: "model.safetensors".into(),
                len: 40 << 20,
                pieces: vec![piece(1000, 9 << 20), piece(30 << 20, 5 << 20)],
            },
        ],
    };
    let mut sent = 0u64;
    // The rounds of one load: each answer a frame of its own.
    for frame in answers.split(|&b| b == 0xff).take(3) {
        let Ok((Response::NeedChunks { chunks }, _)) = decode::<Response>(frame) else { continue };
        let Ok(to_send) = manifest.chunks_to_send(chunks, sent) else { return };
        assert!(to_send.iter().all(|&c| manifest.lists(c)), "a chunk the manifest does not list");
        assert!(to_send.windows(2).all(|pair| pair[0] != pair[1]), "a chunk sent twice in one round");
        sent += to_send.iter().map(|c| c.len).sum::<u64>();
        assert!(sent <= MOST_MANIFESTS_SENT * manifest.total_bytes(), "{sent} bytes sent");
    }
}

/// The most memory a fuzzed worker offers: what it may be made to allocate.
const FUZZ_WORKER_MEMORY: u64 = 64 << 20;

/// A worker's load and first forward step for a master that sent its own
/// `config.json` (the bytes after the first five) beside real weights (the
/// tiny Llama fixture's), asking for a context and a step of the sizes the
/// first bytes give: refused or run, within the memory the worker offers.
pub fn worker_step(data: &[u8]) {
    let Some((&[c0, c1, p0, p1, format], config)) = data.split_first_chunk::<5>() else { return };
    // One folder per process, its config rewritten for every input.
    static FOLDER: std::sync::OnceLock<Option<std::path::PathBuf>> = std::sync::OnceLock::new();
    let folder = FOLDER.get_or_init(|| {
        let weights = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/tiny/llama_tied/model.safetensors");
        let folder = std::env::temp_dir().join(format!("cake-fuzz-worker-{}", std::process::id()));
        std::fs::create_dir_all(&folder).ok()?;
        std::fs::copy(weights, folder.join("model.safetensors")).ok()?;
        Some(folder)
    });
    let Some(folder) = folder else { return };
    if std::fs::write(folder.join("config.json"), config).is_err() {
        return;
    }
    let context = 1usize << (u16::from_le_bytes([c0, c1]) % 40);
    let positions = usize::from(u16::from_le_bytes([p0, p1]));
    let format = if format % 2 == 0 { WireFormat::F32 } else { WireFormat::F16 };
    let Ok(decoder) = load_stage(folder, 1..2, None, context, FUZZ_WORKER_MEMORY, Default::default()) else { return };
    let shape = [1, positions, decoder.config.hidden_size];
    let values = positions.saturating_mul(decoder.config.hidden_size);
    let bytes = match format {
        WireFormat::F32 => 4,
        WireFormat::F16 => 2,
    };
    // A payload only where it is small: a refusal must not need one.
    let payload = if values <= 1 << 20 { vec![0u8; values * bytes] } else { Vec::new() };
    let mut cache = decoder.new_cache();
    let _ = run_step(&decoder, &mut cache, &shape, format, &payload, &[]);
}

/// A whole GGUF file's bytes.
pub fn gguf_header(file: &[u8]) {
    let _ = gguf_header::parse(file, file.len() as u64);
}

/// A whole safetensors file's bytes.
pub fn safetensors_header(file: &[u8]) {
    let _ = SafetensorsHeader::from_file_bytes(Path::new("fuzz.safetensors"), file);
}

/// The pickle of a `torch.save` file (a voice preset's `data.pkl`).
pub fn torch_pickle(data: &[u8]) {
    let _ = unpickle(data);
}

/// An uploaded voice prompt, read and resampled as the speech screen does.
pub fn wav(file: &[u8]) {
    let _ = VoicePrompt::from_wav_bytes(file, "fuzz.wav");
}

/// An attached picture, decoded within the default caps, then resized and
/// normalised as a vision processor would.
pub fn picture(file: &[u8]) {
    if let Ok(image) = picture_decode::decode("fuzz.png", file, &ImageLimits::default()) {
        let _ = pixel_values(&resize(&image, 14, 14, Filter::Bicubic), &Normalization::HALF);
    }
}

/// A chat template as a GGUF file's metadata might carry it, rendered for
/// a short conversation.
pub fn chat_template(source: &[u8]) {
    let Ok(source) = std::str::from_utf8(source) else { return };
    let Ok(template) = ChatTemplate::new(Some(source), Some("<s>"), Some("</s>")) else { return };
    let messages = [ChatMessage::new("system", "Be brief."), ChatMessage::new("user", "Hello")];
    let _ = template.render(&messages, true);
}
