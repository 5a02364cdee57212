//! The messages master and workers exchange inside the secure channel.
//!
//! A message is a JSON header (what it is) followed by an optional binary
//! payload (hidden states as little-endian f16 or f32, as the header's
//! [`WireFormat`] says), packed as `[u32 header length][header][payload]`
//! into one sealed frame.

use super::assignment::GpuCapacity;
use super::weight_transfer::{ChunkRef, ModelManifest};
use crate::models::context::PREFILL_CHUNK;
use crate::models::loader::ComputeDtype;
use anyhow::{bail, Context, Result};
use candle_core::{DType, Device, Tensor};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::ops::Range;

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
    /// Run the loaded layers on hidden states (payload, in `format`) of
    /// `shape`, continuing sequence `sequence`'s KV cache. The answer comes
    /// back in the same format where its values allow; with a `route`, the
    /// hidden states go on to its first hop instead (see [`Hop`]) and the
    /// answer is `Relayed`.
    Forward {
        sequence: u64,
        shape: Vec<usize>,
        format: WireFormat,
        #[serde(default)]
        route: Vec<Hop>,
        /// Spans of positions (within this step) that see each other both
        /// ways: one picture's tokens in Gemma 3.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        mutual: Vec<Range<usize>>,
    },
    /// One decode step of several sequences: row `i` of the hidden states
    /// (`[1, sequences.len(), hidden]`) is the next position of
    /// `sequences[i]`. Answered, or passed on, as `Forward` is.
    ForwardStreams {
        sequences: Vec<u64>,
        shape: Vec<usize>,
        format: WireFormat,
        #[serde(default)]
        route: Vec<Hop>,
    },
    /// From the worker before this one on a master's route: run `step` (a
    /// `Forward` or `ForwardStreams`, hidden states in the payload) for the
    /// master whose session here has inbox `inbox`, which then tells that
    /// master how it went as if the master had asked. Not answered (the
    /// sender goes on at once); a relay that cannot be handed over closes
    /// the connection it came on.
    Relay { inbox: u64, step: Box<Request> },
    /// Drop sequence `sequence`'s KV cache.
    Forget { sequence: u64 },
    /// Start sequence `to`'s KV cache with copies of sequence `from`'s
    /// first `positions` positions (a conversation sharing another's start).
    CopyPrefix { from: u64, to: u64, positions: usize },
    /// Keep only the first `positions` positions of sequence `sequence`'s
    /// KV cache (a conversation whose last turn is edited or regenerated).
    Truncate { sequence: u64, positions: usize },
    /// Keep-alive during idle periods.
    Heartbeat,
    /// Send the payload back (the master times it to measure the link).
    Echo,
}

/// The next stop of hidden states on a master's route through several
/// workers (master → A → B → master rather than back to the master after
/// each): the worker's address as the master reached it, and the inbox of
/// the session there that holds the master's next layers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hop {
    pub address: String,
    pub inbox: u64,
}

/// Which way hidden states travel through the workers of a pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum HiddenRoute {
    /// Master → A → B → master: each worker sends its result on to the next.
    #[default]
    WorkerToWorker,
    /// Master → A → master → B → master: every worker answers the master.
    ThroughMaster,
}

/// Most forward steps a master has in flight on a route at once (see
/// `remote::StepsInFlight`); a worker keeps this many relayed steps waiting
/// per master, so no worker of the route ever needs more.
pub const MOST_STEPS_IN_FLIGHT: usize = 4;

/// Most hops a route may name (more workers than any cluster has).
pub const MAX_ROUTE: usize = 32;

/// Checks a route before anything is sent along it.
pub fn check_route(route: &[Hop]) -> Result<()> {
    if route.len() > MAX_ROUTE {
        bail!("a route of {} hops is longer than the {MAX_ROUTE} allowed", route.len());
    }
    if let Some(hop) = route.iter().find(|hop| hop.address.len() > 256 || hop.address.is_empty()) {
        bail!("a route names an unusable address ({} bytes)", hop.address.len());
    }
    Ok(())
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
    /// Weight bytes a decode step processes per second (measured).
    pub bytes_per_second: f64,
    /// Weight bytes × tokens per second while reading a prompt (measured;
    /// 0 when not reported).
    #[serde(default)]
    pub prompt_bytes_per_second: f64,
    /// Seconds a decoder layer costs beyond its weights (measured; 0 when
    /// not reported).
    #[serde(default)]
    pub layer_overhead_seconds: f64,
    /// Equal on processes that run on one kernel (containers or network
    /// namespaces of one host), which share its cores: a hash of the
    /// kernel's boot id; empty when unknown.
    #[serde(default)]
    pub kernel_boot: String,
    /// Random for each worker process: two adverts or addresses that reach
    /// one process are one machine. Empty when not reported.
    #[serde(default)]
    pub instance: String,
    /// The GPU its layers run on first; `None`: its CPU only (or not reported).
    #[serde(default)]
    pub gpu: Option<Box<GpuReport>>,
}

/// A machine's GPU: which it is, its memory, and what it measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuReport {
    /// e.g. `NVIDIA GeForce RTX 4070 (Vulkan, discrete)`.
    pub device: String,
    /// All its memory, and what is free now; `None` where the driver does not tell.
    pub total_bytes: Option<u64>,
    pub free_bytes: Option<u64>,
    pub capacity: GpuCapacity,
}

/// A worker's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Response {
    Info(WorkerInfo),
    Loaded {
        start: usize,
        end: usize,
        /// Where the worker before this one on a route sends this
        /// session's hidden states (see [`Hop`]).
        #[serde(default)]
        inbox: u64,
    },
    /// The chunks of the manifest the worker does not have yet.
    NeedChunks {
        chunks: Vec<ChunkRef>,
    },
    /// Hidden states (payload, in `format`) of `shape`, how long the
    /// worker's layers took (nanoseconds; the rest of a round trip is
    /// transport), and the bytes the sequence's KV cache holds there.
    Hidden {
        shape: Vec<usize>,
        format: WireFormat,
        #[serde(default)]
        compute_nanos: u64,
        #[serde(default)]
        kv_bytes: u64,
    },
    /// The hidden states went on to the route's next worker: this worker's
    /// layers took `compute_nanos`, its caches hold `kv_bytes`, and
    /// `relayed_bytes` went over the link to the next worker.
    Relayed {
        compute_nanos: u64,
        kv_bytes: u64,
        relayed_bytes: u64,
    },
    /// The hidden states could not be passed on to the route's next worker
    /// (at `next`): it got nothing, and the route is broken there.
    RelayFailed {
        next: String,
        reason: String,
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

/// How hidden states are encoded in a payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum WireFormat {
    /// Little-endian f32: exact.
    F32,
    /// Little-endian f16: half the bytes. Hidden states are computed in
    /// f32; rounding them between machines perturbs each token's NLL (by
    /// about 0.05 nats with int8 activations, docs/cluster.md).
    F16,
}

impl WireFormat {
    /// Bytes one value takes on the wire.
    pub fn value_bytes(self) -> usize {
        match self {
            WireFormat::F32 => 4,
            WireFormat::F16 => 2,
        }
    }
}

/// Hidden states as (shape, the format used, little-endian bytes), in
/// `preferred` where every value fits it and in f32 otherwise (f16 ends at
/// 65 504; some models' hidden states go beyond).
pub fn tensor_to_bytes(t: &Tensor, preferred: WireFormat) -> Result<(Vec<usize>, WireFormat, Vec<u8>)> {
    let shape = t.dims().to_vec();
    let values = t.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()?;
    let fits_f16 = || values.iter().all(|v| v.abs() <= f32::from(half::f16::MAX));
    let format = if preferred == WireFormat::F16 && fits_f16() { WireFormat::F16 } else { WireFormat::F32 };
    let mut bytes = Vec::with_capacity(values.len() * format.value_bytes());
    for v in values {
        match format {
            WireFormat::F32 => bytes.extend_from_slice(&v.to_le_bytes()),
            WireFormat::F16 => bytes.extend_from_slice(&half::f16::from_f32(v).to_le_bytes()),
        }
    }
    Ok((shape, format, bytes))
}

/// The inverse of [`tensor_to_bytes`] (always an f32 tensor), checking the
/// sizes agree and every value is finite.
pub fn tensor_from_bytes(shape: &[usize], format: WireFormat, bytes: &[u8], device: &Device) -> Result<Tensor> {
    // A zero would hide an absurd dimension from the size check below (and
    // overflow the strides candle computes); hidden states are never empty.
    if shape.is_empty() || shape.contains(&0) {
        bail!("hidden states of shape {shape:?} hold no values");
    }
    let elements = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).context("absurd tensor shape")?;
    if elements.checked_mul(format.value_bytes()) != Some(bytes.len()) {
        bail!("hidden states of shape {shape:?} need {elements} {format:?} values, got {} bytes", bytes.len());
    }
    let values: Vec<f32> = match format {
        WireFormat::F32 => bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect(),
        WireFormat::F16 => bytes.chunks_exact(2).map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32()).collect(),
    };
    if let Some(at) = values.iter().position(|v| !v.is_finite()) {
        bail!("hidden states hold a non-finite value ({}) at {at}", values[at]);
    }
    Ok(Tensor::from_vec(values, shape, device)?)
}

/// Checks the shape of hidden states sent to layers of a model with
/// `width` values per position and room for `context` positions, of which
/// `cached` are already used: `[1, positions ≥ 1, width]`, ending inside
/// the context. Called before anything of that size is allocated.
/// Most sequences one `ForwardStreams` may step together.
pub const MAX_STREAMS_PER_STEP: usize = 64;
/// Most sequences whose caches a worker keeps for one master.
pub const MAX_SEQUENCES: usize = 64;

/// Checks a `ForwardStreams` request before anything is allocated: the
/// shape is `[1, sequences, width]`, the sequences distinct and at most
/// [`MAX_STREAMS_PER_STEP`], and each has room for one more position
/// (`cached(sequence)`: positions its cache holds).
pub fn check_streams_shape(
    sequences: &[u64],
    shape: &[usize],
    width: usize,
    cached: impl Fn(u64) -> usize,
    context: usize,
) -> Result<()> {
    if sequences.is_empty() || sequences.len() > MAX_STREAMS_PER_STEP {
        bail!("a step takes 1 to {MAX_STREAMS_PER_STEP} sequences, got {}", sequences.len());
    }
    if shape != [1, sequences.len(), width] {
        bail!(
            "hidden states for {} sequences must be [1, {}, {width}], got {shape:?}",
            sequences.len(),
            sequences.len()
        );
    }
    let mut seen = std::collections::HashSet::new();
    for &sequence in sequences {
        if !seen.insert(sequence) {
            bail!("sequence {sequence} appears twice in one step");
        }
        check_hidden_shape(&[1, 1, width], width, cached(sequence), context)?;
    }
    Ok(())
}

/// Most positions one forward step may carry: a master reads a prompt in
/// chunks of this many, so nothing larger is ever sent, and it bounds what
/// a step makes a worker allocate (its attention scores grow with
/// positions × context).
pub const MAX_STEP_POSITIONS: usize = PREFILL_CHUNK;

/// Checks a step's `mutual` spans against its positions `first..first +
/// positions`: each inside the step, in order, without overlapping.
pub fn check_mutual_spans(mutual: &[Range<usize>], first: usize, positions: usize) -> Result<()> {
    let mut free_from = first;
    for span in mutual {
        if span.start < free_from || span.end <= span.start || span.end > first + positions {
            bail!("positions {span:?} cannot see each other in a step of positions {first}..{}", first + positions);
        }
        free_from = span.end;
    }
    Ok(())
}

/// Checks hidden states of `shape` for a model `width` wide, continuing a
/// cache of `cached` positions in a context of `context`.
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
    if positions > MAX_STEP_POSITIONS {
        bail!("a step of {positions} positions is more than the {MAX_STEP_POSITIONS} one step may carry");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_with_payloads() {
        let forward = Request::Forward {
            sequence: 7,
            shape: vec![1, 2, 3],
            format: WireFormat::F16,
            route: vec![],
            mutual: vec![0..1, 1..3],
        };
        let frame = encode(&forward, &[1, 2, 3, 4]);
        let (header, payload): (Request, _) = decode(&frame).unwrap();
        assert_eq!(header, forward);
        assert_eq!(payload, &[1, 2, 3, 4]);
    }

    #[test]
    fn a_step_of_several_sequences_is_checked_before_anything_runs() {
        let none_cached = |_| 0;
        assert!(check_streams_shape(&[1, 2], &[1, 2, 8], 8, none_cached, 16).is_ok());
        for (sequences, shape) in [
            (vec![], vec![1, 0, 8]),
            (vec![1, 2], vec![1, 3, 8]),
            (vec![1, 2], vec![2, 2, 8]),
            (vec![1, 2], vec![1, 2, 9]),
            (vec![4, 4], vec![1, 2, 8]),
            ((0..MAX_STREAMS_PER_STEP as u64 + 1).collect(), vec![1, MAX_STREAMS_PER_STEP + 1, 8]),
        ] {
            assert!(check_streams_shape(&sequences, &shape, 8, none_cached, 16).is_err(), "{sequences:?} {shape:?}");
        }
        let full = |sequence| if sequence == 2 { 16 } else { 0 };
        let error = check_streams_shape(&[1, 2], &[1, 2, 8], 8, full, 16).unwrap_err();
        assert!(error.to_string().contains("context length 16"), "{error}");
    }

    #[test]
    fn malformed_messages_are_errors() {
        assert!(decode::<Request>(&[0, 0]).is_err());
        assert!(decode::<Request>(&[0, 0, 0, 99, b'{']).is_err());
        assert!(decode::<Request>(&encode(&serde_json::json!({"type": "launch_missiles"}), &[])).is_err());
        let (f32, f16, cpu) = (WireFormat::F32, WireFormat::F16, &Device::Cpu);
        assert!(tensor_from_bytes(&[2, 2], f32, &[0; 15], cpu).is_err());
        assert!(tensor_from_bytes(&[2, 2], f16, &[0; 16], cpu).is_err(), "f16 values take 2 bytes");
        assert!(tensor_from_bytes(&[usize::MAX, 2], f16, &[], cpu).is_err());
        assert!(tensor_from_bytes(&[1], f32, &f32::NAN.to_le_bytes(), cpu).is_err(), "NaN is refused");
        assert!(tensor_from_bytes(&[1], f32, &f32::INFINITY.to_le_bytes(), cpu).is_err(), "infinity is refused");
        assert!(tensor_from_bytes(&[1], f16, &half::f16::INFINITY.to_le_bytes(), cpu).is_err(), "in f16 too");
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
    fn tensors_round_trip_in_either_format() {
        let t = Tensor::new(&[[1.5f32, -2.0], [3.25, 0.0]], &Device::Cpu).unwrap();
        for format in [WireFormat::F32, WireFormat::F16] {
            let (shape, used, bytes) = tensor_to_bytes(&t, format).unwrap();
            assert_eq!((used, bytes.len()), (format, 4 * format.value_bytes()));
            let back = tensor_from_bytes(&shape, used, &bytes, &Device::Cpu).unwrap();
            assert_eq!(back.to_vec2::<f32>().unwrap(), t.to_vec2::<f32>().unwrap(), "values exact in f16");
        }
    }

    /// f16 rounds to 11 significant bits; a value beyond its range sends
    /// the whole message in f32 instead of turning into infinity.
    #[test]
    fn half_precision_rounds_and_falls_back_to_f32_beyond_its_range() {
        let t = Tensor::new(&[0.1f32, -1234.567], &Device::Cpu).unwrap();
        let (shape, used, bytes) = tensor_to_bytes(&t, WireFormat::F16).unwrap();
        let back = tensor_from_bytes(&shape, used, &bytes, &Device::Cpu).unwrap().to_vec1::<f32>().unwrap();
        assert!((back[0] - 0.1).abs() <= 0.1 / 2048.0 && (back[1] + 1234.567).abs() <= 1234.567 / 2048.0, "{back:?}");
        let big = Tensor::new(&[1.0f32, 70_000.0], &Device::Cpu).unwrap();
        let (shape, used, bytes) = tensor_to_bytes(&big, WireFormat::F16).unwrap();
        assert_eq!(used, WireFormat::F32);
        let back = tensor_from_bytes(&shape, used, &bytes, &Device::Cpu).unwrap();
        assert_eq!(back.to_vec1::<f32>().unwrap(), vec![1.0, 70_000.0]);
    }
}
