//! The readers of untrusted bytes, as the fuzzers drive them.
//!
//! Each function takes arbitrary bytes and passes them through one reader
//! the way Cake's own code does, ignoring the verdict: refusing the input
//! is correct, and only a panic, a hang or a huge allocation is a bug. The
//! `cake-fuzz` crate (`fuzz/`, run with `make fuzz`) calls these under
//! libFuzzer; `tests/fuzz_regressions.rs` replays every input that once
//! failed, without the fuzzer, in `make test`.

use crate::cluster::protocol::{check_hidden_shape, decode, tensor_from_bytes, Request, Response};
use crate::cluster::remote::plausible;
use crate::cluster::weight_transfer::unpack_chunk;
use crate::formats::gguf_header;
use crate::formats::safetensors::SafetensorsHeader;
use crate::formats::torch_pickle::unpickle;
use crate::speech::voice_prompt::VoicePrompt;
use crate::text::chat_template::{ChatMessage, ChatTemplate};
use candle_core::Device;
use std::path::Path;

/// One fuzz target: arbitrary bytes in, nothing out.
pub type Target = fn(&[u8]);

/// The fuzz targets by name, for `make fuzz` and the regression replay.
pub const TARGETS: [(&str, Target); 6] = [
    ("cluster_message", cluster_message),
    ("gguf_header", gguf_header),
    ("safetensors_header", safetensors_header),
    ("wav", wav),
    ("chat_template", chat_template),
    ("torch_pickle", torch_pickle),
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

/// A chat template as a GGUF file's metadata might carry it, rendered for
/// a short conversation.
pub fn chat_template(source: &[u8]) {
    let Ok(source) = std::str::from_utf8(source) else { return };
    let Ok(template) = ChatTemplate::new(Some(source), Some("<s>"), Some("</s>")) else { return };
    let messages = [ChatMessage::new("system", "Be brief."), ChatMessage::new("user", "Hello")];
    let _ = template.render(&messages, true);
}
