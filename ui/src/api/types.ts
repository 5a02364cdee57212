// The data shapes of Cake's app API, transcribed from docs/api.md.
// Keep this file in step with that document: it is the UI/backend contract.

export type ModelSource = "default" | "hf-cache" | "imported";
export type ModelStatus = "complete" | "incomplete" | "not-a-model";

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
  size_bytes: number;
  status: ModelStatus;
  /** Why the model is incomplete / not a model. */
  problem: string | null;
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
}

export interface ReplyStats {
  prompt_tokens: number;
  completion_tokens: number;
  ttft_s: number;
  decode_tok_s: number;
  finish_reason: string;
}

/** A message as stored in a conversation: assistant replies keep their stats. */
export type StoredMessage = ChatMessage & { stats?: ReplyStats };

export interface Conversation {
  /** [A-Za-z0-9_-]{1,64} */
  id: string;
  title: string;
  model_id: string | null;
  system_prompt: string;
  sampling: Sampling;
  messages: StoredMessage[];
  /** RFC 3339 */
  created_at: string;
  updated_at: string;
}

export interface ConversationSummary {
  id: string;
  title: string;
  updated_at: string;
}

export interface AppInfo {
  version: string;
  data_dir: string;
  default_model_id: string | null;
}

export interface ModelList {
  models: ModelEntry[];
  loaded: string | null;
}

// ---- Stream events -------------------------------------------------------

/** Sent by any streaming command that fails after it started. */
export interface ErrorEvent {
  type: "error";
  message: string;
}

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

export interface TokenEvent {
  type: "token";
  text: string;
}

export interface ChatDoneEvent {
  type: "done";
  stats: ReplyStats;
}

export type DownloadEvent = DownloadProgressEvent | ModelDoneEvent | ErrorEvent;
export type LoadEvent = LoadProgressEvent | ModelDoneEvent | ErrorEvent;
export type ChatEvent = TokenEvent | ChatDoneEvent | ErrorEvent;

export interface ChatRequest {
  model_id: string;
  messages: ChatMessage[];
  sampling: Sampling;
  max_tokens: number;
}
