// The data shapes of Cake's app API, transcribed from docs/api.md.
// Keep this file in step with that document: it is the UI/backend contract.

export type ModelSource = "default" | "hf-cache" | "imported";
export type ModelStatus = "complete" | "incomplete" | "not-a-model" | "unsupported";
/** What a model makes: chat replies ("text"), audio from a script ("speech") or vectors of texts ("embedding"). */
export type ModelKind = "text" | "speech" | "embedding";
/**
 * What a speech model speaks in, and what a voice is: a WAV voice prompt per
 * speaker of a `Speaker N:` script (VibeVoice-1.5B), or one voice preset for
 * plain text (VibeVoice-Realtime-0.5B).
 */
/** What a stored voice is: a WAV prompt (with a transcript or not) or a preset. */
export type VoiceKind = "prompt" | "preset";

/** What a speech model speaks in: prompts, one preset, or one prompt with its transcript (LuxTTS). */
export type ModelVoiceKind = VoiceKind | "transcribed_prompt";

export interface ModelEntry {
  /** Stable id: "default", "hf:org/name", "file:/abs/path". */
  id: string;
  name: string;
  source: ModelSource;
  /** File or folder on the serving machine. */
  path: string;
  architecture: string | null;
  parameters: number | null;
  dtype: string | null;
  /** How the weights are quantized ("Q4_1", "fp8", "gptq"); absent or null for plain floats. */
  quantization?: string | null;
  size_bytes: number;
  status: ModelStatus;
  /** Why the model is incomplete / not a model. */
  problem: string | null;
  /** The sampling its makers recommend (its generation_config.json); null fields: no advice. */
  sampling_defaults?: { [K in keyof Sampling]?: number | null };
  /** A text model that reads pictures too (its vision tower is there). */
  reads_pictures?: boolean;
  /** Absent from older backends: read it with `modelKind()` (state/app-state.ts), which treats it as "text". */
  kind?: ModelKind;
  /** Speech models: the voices they speak in; read it with `modelVoiceKind()` (lib/speech.ts). Null for text models. */
  voice?: ModelVoiceKind | null;
}

export interface Sampling {
  temperature: number;
  top_k: number;
  top_p: number;
  min_p: number;
  repeat_penalty: number;
  seed: number;
}

export type Role = "system" | "user" | "assistant";

export interface ChatMessage {
  role: Role;
  content: string;
  /** An assistant reply's reasoning, kept apart from its answer. */
  reasoning_content?: string;
  /** A user's turn: the ids of the stored pictures it shows (`add_picture`), before its text. */
  pictures?: string[];
}

/** Why a reply ended, as the engine says it (`text/generation.rs` FinishReason). */
export type FinishReason = "eos" | "stop_string" | "max_tokens" | "context_full" | "cancelled";

export interface ReplyStats {
  prompt_tokens: number;
  /** Messages left out, oldest first, so the rest fit the context (absent: none). */
  dropped_messages?: number;
  /** Seconds spent loading the model before this reply (absent: it was loaded). */
  load_s?: number;
  /** The most replies decoded in one step with this one, itself included (absent: alone). */
  decoded_together?: number;
  /** The most groups of replies whose steps were in flight across the cluster at once (absent: one at a time). */
  groups_in_flight?: number;
  completion_tokens: number;
  ttft_s: number;
  decode_tok_s: number;
  finish_reason: FinishReason;
}

/**
 * A message as stored in a conversation: assistant replies keep their
 * reasoning and stats.
 * `stopped`: the person stopped this reply before it ended (it has no stats then).
 * `alternatives`: on a regenerated reply or an edited message, the versions it replaced.
 */
export type StoredMessage = Omit<ChatMessage, "reasoning_content"> & {
  /** The model's reasoning before its answer (models that think first). */
  reasoning?: string;
  stats?: ReplyStats;
  stopped?: boolean;
  alternatives?: ReplyVersions;
};

/**
 * The versions of a conversation from a regenerated reply on, each that
 * reply and the messages after it: the ones not shown, in order, and where
 * the shown one sits among all of them.
 */
export interface ReplyVersions {
  others: StoredMessage[][];
  position: number;
}

export interface Conversation {
  /** [A-Za-z0-9_-]{1,64} */
  id: string;
  title: string;
  /** True once the user named it: the title then no longer follows the first message. */
  title_set: boolean;
  model_id: string | null;
  system_prompt: string;
  sampling: Sampling;
  messages: StoredMessage[];
  /** Read each new reply aloud with the Speech screen's model and voice (absent: off). */
  auto_read?: boolean;
  /** RFC 3339 */
  created_at: string;
  updated_at: string;
}

export interface ConversationSummary {
  id: string;
  title: string;
  updated_at: string;
  /** Why the conversation's file cannot be read; it is kept as it is. */
  damaged?: string;
}

/** A conversation found by `search_conversations`, with the text around the match. */
export interface ConversationMatch extends ConversationSummary {
  snippet: string;
}

export interface AppInfo {
  version: string;
  data_dir: string;
  default_model_id: string | null;
}

export interface ModelList {
  models: ModelEntry[];
  loaded: string | null;
  /** Where the loaded model's layers run on this machine. */
  loaded_gpu: GpuPlacement | null;
}

/** Whether models run on this machine's GPU: not at all, on a hardware GPU
 *  if there is one, or on any driver (software ones too). */
export type GpuMode = "off" | "auto" | "on";

/** Which of a loaded model's layers the GPU holds, and why others do not. */
export interface GpuPlacement {
  /** The GPU, e.g. "NVIDIA GeForce RTX 4070 (Vulkan, discrete)"; null: none used. */
  device: string | null;
  layers: number[];
  weight_bytes: number;
  cpu_reasons: string[];
}

/** What a GPU mode finds on this machine. */
export interface GpuFound {
  device: string | null;
  /** Why there is none. */
  unavailable: string | null;
}

// ---- The hub ----------------------------------------------------------------

/** A repository of GGUF models a hub search found. */
export interface HubModel {
  repo_id: string;
  downloads: number;
  likes: number;
}

/** One GGUF file of a hub repository. */
export interface HubFile {
  name: string;
  size_bytes: number;
  /** As the file's name says (`Q4_K_M`, `IQ4_XS`, `F16`, …), or null. */
  quantization: string | null;
}

export interface HubFiles {
  files: HubFile[];
  /** The picture reader (an mmproj file) a download brings with a model of its folder, or null. */
  picture_reader: HubFile | null;
  /** Parts of models split over several files (not listed: Cake reads single-file GGUF). */
  split_files: number;
}

// ---- Stream events -------------------------------------------------------

/** Sent by any streaming command that fails after it started. */
export interface ErrorEvent {
  type: "error";
  message: string;
  /**
   * `bad_request`: the request cannot work as sent; `prompt_too_long`: the
   * conversation does not fit the model's context (without its oldest turns
   * it would); `last_turn_too_long`: its last message alone does not fit; `unavailable`: the
   * cluster's machines cannot run it now (try again later); `failed`: it
   * failed while served; `hub_unreachable`: the model hub cannot be
   * reached (no internet connection).
   */
  kind: ErrorKind;
}

export type ErrorKind =
  "bad_request" | "prompt_too_long" | "last_turn_too_long" | "failed" | "unavailable" | "hub_unreachable";

export interface DownloadProgressEvent {
  type: "progress";
  file: string;
  downloaded_bytes: number;
  total_bytes: number;
  bytes_per_s: number;
  eta_s: number;
}

export interface LoadProgressEvent {
  type: "progress";
  fraction: number;
  message: string;
}

export interface ModelDoneEvent {
  type: "done";
  model: ModelEntry;
}

/** A piece of a reply's answer. */
export interface TokenEvent {
  type: "token";
  text: string;
}

/** A piece of a reply's reasoning (a model that thinks before it answers). */
export interface ReasoningEvent {
  type: "reasoning";
  text: string;
}

/** Which part of a reply a piece belongs to. */
export type ReplyPart = "answer" | "reasoning";

/** Something the person should know mid-reply (e.g. a worker was lost and the reply continues). */
export interface NoticeEvent {
  type: "notice";
  message: string;
}

/** How far a chat has read its prompt (sent for prompts longer than one chunk). */
export interface PromptProgressEvent {
  type: "progress";
  read_tokens: number;
  prompt_tokens: number;
}

export interface ChatDoneEvent {
  type: "done";
  stats: ReplyStats;
}

export type DownloadEvent = DownloadProgressEvent | ModelDoneEvent | ErrorEvent;
export type LoadEvent = LoadProgressEvent | ModelDoneEvent | ErrorEvent;
export type ChatEvent = TokenEvent | ReasoningEvent | NoticeEvent | PromptProgressEvent | ChatDoneEvent | ErrorEvent;

export interface ChatRequest {
  model_id: string;
  messages: ChatMessage[];
  sampling: Sampling;
  max_tokens: number;
  /** Read at most this many tokens (prompt and reply); absent: the model's context length. */
  context_length?: number;
  /** Leave out the oldest turns when the conversation does not fit. */
  drop_oldest_turns?: boolean;
}

// ---- Cluster ---------------------------------------------------------------

/** `set_cluster_settings` args: every field optional, absent = unchanged. */
export interface ClusterSettingsUpdate {
  /** "" forgets the key. */
  key?: string;
  join_as_worker?: boolean;
  worker_name?: string;
  /** 0 = any free port. */
  worker_port?: number;
  /** [] = all interfaces; "lo" = IPv4 loopback only. */
  mdns_interfaces?: string[];
  /** 0..60 */
  discovery_timeout_s?: number;
  /** Workers added by address (`host:port`), tried beside those mDNS finds. */
  worker_addresses?: string[];
  /** Tokens a conversation may hold; 0 for the model's own (up to 8 192). */
  context_length?: number;
  gpu?: GpuMode;
}

export type ClusterKeyStorage = "keyring" | "file";

export interface ClusterSettings {
  key_set: boolean;
  /** The public id of a generated key (`cake1-<id>-…`); null for a typed key. */
  cluster_id: string | null;
  /** Why the key is weak (a typed key that could be guessed), or null. */
  key_warning: string | null;
  key_storage: ClusterKeyStorage | null;
  /** `cake serve --cluster-key/--worker/--topology` in effect. */
  from_command_line: boolean;
  join_as_worker: boolean;
  worker_name: string;
  worker_port: number;
  mdns_interfaces: string[];
  discovery_timeout_s: number;
  worker_addresses: string[];
  /** 0: the model's own context, up to 8 192 tokens. */
  context_length: number;
  gpu: GpuMode;
}

export type ClusterRole = "off" | "master" | "worker";

/** A master this machine serves as a worker. */
export interface MasterSession {
  address: string;
  /** Start (inclusive), end (exclusive). */
  layers: [number, number] | null;
  weights_received: number;
  weights_needed: number;
  forwards: number;
}

/** Role "worker": what this machine serves. */
export interface WorkerService {
  /** Where it listens (`0.0.0.0:port`: on every interface). */
  address: string;
  /** Where other machines reach it: this machine's network addresses with the port (absent from older backends). */
  reachable_at?: string[];
  masters: MasterSession[];
}

export type MachineState = "this_machine" | "authenticated" | "rejected" | "unreachable" | "lost";

export interface MachineInfo {
  name: string;
  os: string;
  cpu: string;
  devices: string[];
  memory_bytes: number;
  bytes_per_second: number;
  /** The GPU its layers run on first; null: its CPU only. */
  gpu?: MachineGpu | null;
}

/** A machine's GPU as it reported it. */
export interface MachineGpu {
  device: string;
  total_bytes: number | null;
  free_bytes: number | null;
  capacity: {
    /** VRAM it may fill with layers; null where the driver does not tell. */
    memory_bytes: number | null;
    max_layers: number | null;
    bytes_per_second: number;
    prompt_bytes_per_second: number;
    layer_overhead_seconds: number;
  };
}

export interface Machine {
  name: string;
  /** Null for this machine. */
  address: string | null;
  state: MachineState;
  /** Why it is rejected / unreachable / lost. */
  problem: string | null;
  info: MachineInfo | null;
  /** Other adverts or addresses that reached this same worker process. */
  also_named?: string[];
}

/** One stage of the pipeline: the layers one machine runs. */
export interface ClusterStage {
  node: string;
  /** Null for this machine. */
  address: string | null;
  /** Start (inclusive), end (exclusive); may be empty. */
  layers: [number, number];
  /** Weight bytes it holds. */
  bytes: number;
  /** Bytes its layers' KV caches take at full context. */
  kv_bytes: number;
  /** All the RAM planned for it: weights, caches, working memory, margin (of its CPU's layers). */
  memory_bytes: number;
  /** The layers its GPU runs, and the VRAM planned for them. */
  gpu_layers: number[];
  gpu_memory_bytes: number;
  /** The planner's estimate. */
  seconds_per_token: number;
  /** Why it got these layers. */
  reason: string;
  /** 0..1, its share of the time spent in layers so far. */
  compute_share: number;
  /** Traffic with this worker. */
  bytes_sent: number;
  bytes_received: number;
  /** Weight transfer of the current load. */
  weights_sent: number;
  weights_to_send: number;
  /** Set when the worker stopped answering. */
  lost: string | null;
  /** Workers only: the speed it claims, and what the master measured on decode steps (null before 4 steps). */
  claimed_bytes_per_second: number | null;
  measured_bytes_per_second: number | null;
  /** Set when the claim is far above the measurement; later plans use the measurement. */
  speed_doubt: string | null;
}

/** Role "master": the model spread over the machines. */
export interface ClusterRun {
  model_name: string;
  total_layers: number;
  /** Tokens a conversation may hold: what the caches are planned for. */
  context_length: number;
  /** False while weights are still being sent. */
  ready: boolean;
  /** How several conversations' decode steps go over the machines (absent before the workers load). */
  decode_steps?: { pipelined: boolean; why: string } | null;
  /** Pipeline order; this machine first. */
  stages: ClusterStage[];
}

export interface ClusterStatus {
  settings: ClusterSettings;
  role: ClusterRole;
  worker: WorkerService | null;
  /** Why joining as worker failed. */
  worker_error: string | null;
  /** Role "master": this machine first, then the workers seen. */
  machines: Machine[];
  run: ClusterRun | null;
  /** What each GPU mode finds on this machine. */
  gpus: { auto: GpuFound; on: GpuFound };
}

// ---- Speech ------------------------------------------------------------------

/**
 * A stored voice: a voice prompt (24 kHz mono WAV) a speaker of a script
 * speaks in, or a voice preset (no audio: it cannot be played).
 */
export interface Voice {
  id: string;
  name: string;
  /** Absent from older backends: read it with `voiceKind()` (lib/speech.ts), which treats it as "prompt". */
  kind?: VoiceKind;
  /** Null for a preset. */
  duration_s: number | null;
  /** 24000; null for a preset. */
  sample_rate: number | null;
  /** RFC 3339 */
  created_at: string;
  /** Set when the file was cut to the 60 s prompt limit. */
  notice: string | null;
  /** What a prompt says (LuxTTS reads it); absent when unknown. */
  transcript?: string | null;
}

/** Why a clip ended. */
export type ClipEnd = "end_of_text" | "length" | "stopped";

/** A stored piece of generated speech. */
export interface Clip {
  id: string;
  script: string;
  voice_ids: string[];
  model_id: string;
  duration_s: number;
  frames: number;
  seed: number;
  cfg_scale: number;
  steps: number;
  end: ClipEnd;
  /** RFC 3339 */
  created_at: string;
}

/**
 * `add_voice` args: a file on the serving machine (desktop) or an upload
 * (browser); a WAV becomes a prompt, a `.pt` or `.safetensors` preset a
 * preset. `wav_base64` is the older form of an upload, for WAVs only.
 */
export type VoiceSource =
  | { name: string; path: string }
  | { name: string; file_base64: string; file_name: string }
  | { name: string; wav_base64: string; file_name?: string };

/** `add_picture`: a file on the serving machine (the desktop window's drops) or an upload. */
export type PictureSource = { path: string } | { file_base64: string; file_name: string };

/** A picture kept for conversations: its id (the SHA-256 of the file) and its upright size. */
export interface StoredPicture {
  id: string;
  width: number;
  height: number;
}

/** `voice_audio` / `clip_audio`: a 16-bit PCM mono WAV file, base64-encoded. */
export interface WavAudio {
  wav_base64: string;
}

export interface SpeakRequest {
  model_id: string;
  script: string;
  /** The voice of each speaker, in order of their numbers; a preset model: its one preset. */
  voice_ids: string[];
  /** Absent: the model's default (1.3 for prompt models, 1.5 for preset models). */
  cfg_scale?: number;
  /** Diffusion steps per frame; absent: the model's default (10 for prompt models, 5 for preset models). */
  steps?: number;
  /** Absent = a random seed (the clip records the one used). */
  seed?: number;
  max_seconds?: number;
  /** False (the chat's Read aloud): keep nothing, end with the WAV instead of a clip. */
  keep_clip?: boolean;
}

/** The speech model is being loaded before speaking. */
export interface SpeakLoadingEvent {
  type: "loading";
  fraction: number;
  message: string;
}

/**
 * Audio made so far, and which piece of the script is being spoken: a long
 * script is split at sentences. Older backends send neither `piece` nor
 * `pieces` (one piece).
 */
export interface SpeakProgressEvent {
  type: "progress";
  frames: number;
  seconds: number;
  /** 1-based. */
  piece?: number;
  pieces?: number;
  /** LuxTTS: the current piece's sampling steps done, of how many. */
  step?: number;
  steps?: number;
}

/** The next audio made: mono signed 16-bit little-endian PCM, right after the previous chunk. */
export interface SpeakAudioEvent {
  type: "audio";
  pcm16_base64: string;
  /** 24000. */
  sample_rate: number;
}

export interface SpeakDoneEvent {
  type: "done";
  clip: Clip;
}

/** What a `speak` stream sends before it ends. */
export type SpeakUpdate = SpeakLoadingEvent | SpeakProgressEvent | SpeakAudioEvent;
export type SpeakEvent = SpeakUpdate | SpeakDoneEvent | ErrorEvent;

/** The desktop app's OpenAI API for other programs (see the Models screen). */
export interface OpenAiApiStatus {
  enabled: boolean;
  port: number;
  /** `http://127.0.0.1:<port>/v1` while serving. */
  base_url: string | null;
  /** What clients send as `Authorization: Bearer …`, while serving. */
  api_key: string | null;
  /** Why it is not serving although switched on. */
  error: string | null;
}

/** What bounds a predicted time most. */
export type PredictionLimit =
  { kind: "memory" | "compute"; machine: string; seconds: number } | { kind: "link"; seconds: number };

/** What a plan is predicted to give one conversation. */
export interface PlanPrediction {
  decode_tokens_per_second: number;
  /** Seconds of each decode step spent on the links. */
  link_seconds_per_token: number;
  decode_limit: PredictionLimit;
  /** The prompt length the time to first token is for. */
  prompt_tokens: number;
  first_token_seconds: number;
  prompt_limit: PredictionLimit;
}

/** One stage of a previewed plan. */
export interface PreviewStage {
  node: string;
  layers: { start: number; end: number };
  bytes: number;
  /** What its decode step reads, in bytes of Q8_0 that take as long to multiply. */
  read_bytes: number;
  kv_bytes: number;
  /** RAM planned: the layers its CPU runs, working memory, margin. */
  memory_bytes: number;
  /** The layers its GPU runs, and the VRAM planned for them. */
  gpu_layers: number[];
  gpu_memory_bytes: number;
  seconds_per_token: number;
  reason: string;
}

/** One plan the preview compared. */
export interface PreviewOption {
  /** "this machine alone", "all 3 machines", or the machines it uses. */
  label: string;
  machines: string[];
  /** Why it cannot run. */
  refused: string | null;
  plan: { context_length: number; bottleneck_seconds: number; stages: PreviewStage[] } | null;
  prediction: PlanPrediction | null;
}

/** `preview_cluster`: the plans for a model, the one picked and why. */
export interface ClusterPreview {
  options: PreviewOption[];
  /** Index of the fastest plan that runs. */
  chosen: number | null;
  reason: string;
}
