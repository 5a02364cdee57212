//! The messages master and workers exchange inside the secure channel.
//!
//! A message is a JSON header (what it is) followed by an optional binary
//! payload (hidden states as little-endian f32), packed as
//! `[u32 header length][header][payload]` into one sealed frame.

use super::weight_transfer::{ChunkRef, ModelManifest};
use crate::models::loader::ComputeDtype;
use anyhow::{bail, Context, Result};
use candle_core::{DType, Device, Tensor};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// What the master asks of a worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Request {
    /// Describe yourself.
    Info,
    /// Load layers `start..end` of the model the manifest describes, for
    /// conversations of up to `context_length` tokens; the worker answers
    /// `NeedChunks` until it has all its bytes.
    Load { manifest: ModelManifest, start: usize, end: usize, dtype: Option<ComputeDtype>, context_length: usize },
    /// One chunk of weights (payload: LZ4 with the size prepended).
    Chunk { manifest_key: String, chunk: ChunkRef, sha256: String },
    /// Run the loaded layers on hidden states (payload, f32) of `shape`,
    /// continuing sequence `sequence`'s KV cache.
    Forward { sequence: u64, shape: Vec<usize> },
    /// Drop sequence `sequence`'s KV cache.
    Forget { sequence: u64 },
    /// Keep-alive during idle periods.
    Heartbeat,
}

/// A machine as it describes itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerInfo {
    pub name: String,
    pub os: String,
    pub cpu: String,
    pub devices: Vec<String>,
    /// Bytes of memory it can give a model's layers (weights, caches,
    /// working memory).
    pub memory_bytes: u64,
    /// Estimated weight bytes processed per second.
    pub bytes_per_second: f64,
}

/// A worker's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Response {
    Info(WorkerInfo),
    Loaded {
        start: usize,
        end: usize,
    },
    /// The chunks of the manifest the worker does not have yet.
    NeedChunks {
        chunks: Vec<ChunkRef>,
    },
    /// Hidden states (payload, f32) of `shape`, how long the worker's
    /// layers took (nanoseconds; the rest of a round trip is transport),
    /// and the bytes the sequence's KV cache holds there.
    Hidden {
        shape: Vec<usize>,
        #[serde(default)]
        compute_nanos: u64,
        #[serde(default)]
        kv_bytes: u64,
    },
    Done,
    Error {
        message: String,
    },
}

/// Packs a header and payload into one frame body.
pub fn encode<T: Serialize>(header: &T, payload: &[u8]) -> Vec<u8> {
    let json = serde_json::to_vec(header).expect("messages serialize");
    let mut out = Vec::with_capacity(4 + json.len() + payload.len());
    out.extend_from_slice(&(json.len() as u32).to_be_bytes());
    out.extend_from_slice(&json);
    out.extend_from_slice(payload);
    out
}

/// Splits a frame body into its header and payload.
pub fn decode<T: DeserializeOwned>(frame: &[u8]) -> Result<(T, &[u8])> {
    if frame.len() < 4 {
        bail!("a message of {} bytes is too short", frame.len());
    }
    let len = u32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]) as usize;
    let json = frame.get(4..4 + len).context("a message header runs past the frame")?;
    let header = serde_json::from_slice(json).context("a message header is not valid")?;
    Ok((header, &frame[4 + len..]))
}

/// Hidden states as (shape, f32 little-endian bytes).
pub fn tensor_to_bytes(t: &Tensor) -> Result<(Vec<usize>, Vec<u8>)> {
    let shape = t.dims().to_vec();
    let values = t.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()?;
    let mut bytes = Vec::with_capacity(values.len() * 4);
    for v in values {
        bytes.extend_from_slice(&v.to_le_bytes());
    }
    Ok((shape, bytes))
}

/// The inverse of [`tensor_to_bytes`], checking the sizes agree.
pub fn tensor_from_bytes(shape: &[usize], bytes: &[u8], device: &Device) -> Result<Tensor> {
    // A zero would hide an absurd dimension from the size check below (and
    // overflow the strides candle computes); hidden states are never empty.
    if shape.is_empty() || shape.contains(&0) {
        bail!("hidden states of shape {shape:?} hold no values");
    }
    let elements = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).context("absurd tensor shape")?;
    if elements.checked_mul(4) != Some(bytes.len()) {
        bail!("hidden states of shape {shape:?} need {elements} values, got {} bytes", bytes.len());
    }
    let values: Vec<f32> = bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    if let Some(at) = values.iter().position(|v| !v.is_finite()) {
        bail!("hidden states hold a non-finite value ({}) at {at}", values[at]);
    }
    Ok(Tensor::from_vec(values, shape, device)?)
}

/// Checks the shape of hidden states sent to layers of a model with
/// `width` values per position and room for `context` positions, of which
/// `cached` are already used: `[1, positions ≥ 1, width]`, ending inside
/// the context. Called before anything of that size is allocated.
pub fn check_hidden_shape(shape: &[usize], width: usize, cached: usize, context: usize) -> Result<()> {
    let &[batch, positions, values] = shape else {
        bail!("hidden states must be [1, positions, {width}], got {shape:?}");
    };
    if batch != 1 || positions == 0 || values != width {
        bail!("hidden states must be [1, positions ≥ 1, {width}], got {shape:?}");
    }
    if cached.saturating_add(positions) > context {
        bail!("positions {cached}..{} run past the model's context length {context}", cached.saturating_add(positions));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_with_payloads() {
        let frame = encode(&Request::Forward { sequence: 7, shape: vec![1, 2, 3] }, &[1, 2, 3, 4]);
        let (header, payload): (Request, _) = decode(&frame).unwrap();
        assert_eq!(header, Request::Forward { sequence: 7, shape: vec![1, 2, 3] });
        assert_eq!(payload, &[1, 2, 3, 4]);
    }

    #[test]
    fn malformed_messages_are_errors() {
        assert!(decode::<Request>(&[0, 0]).is_err());
        assert!(decode::<Request>(&[0, 0, 0, 99, b'{']).is_err());
        assert!(decode::<Request>(&encode(&serde_json::json!({"type": "launch_missiles"}), &[])).is_err());
        assert!(tensor_from_bytes(&[2, 2], &[0; 15], &Device::Cpu).is_err());
        assert!(tensor_from_bytes(&[usize::MAX, 2], &[], &Device::Cpu).is_err());
        assert!(tensor_from_bytes(&[1], &f32::NAN.to_le_bytes(), &Device::Cpu).is_err(), "NaN is refused");
        assert!(tensor_from_bytes(&[1], &f32::INFINITY.to_le_bytes(), &Device::Cpu).is_err(), "infinity is refused");
    }

    #[test]
    fn hidden_shapes_are_checked_against_the_model() {
        assert!(check_hidden_shape(&[1, 3, 64], 64, 10, 100).is_ok());
        for (shape, cached) in [
            (vec![1, 0, 64], 0),
            (vec![2, 1, 64], 0),
            (vec![1, 1, 63], 0),
            (vec![1, 64], 0),
            (vec![1, 400_000, 64], 0),
            (vec![1, 1, 64], 100),
        ] {
            assert!(check_hidden_shape(&shape, 64, cached, 100).is_err(), "{shape:?} after {cached}");
        }
    }

    #[test]
    fn tensors_round_trip() {
        let t = Tensor::new(&[[1.5f32, -2.0], [3.25, 0.0]], &Device::Cpu).unwrap();
        let (shape, bytes) = tensor_to_bytes(&t).unwrap();
        let back = tensor_from_bytes(&shape, &bytes, &Device::Cpu).unwrap();
        assert_eq!(back.to_vec2::<f32>().unwrap(), t.to_vec2::<f32>().unwrap());
    }
}
