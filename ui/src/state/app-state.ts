// The whole UI state in one object, plus selectors that derive values from
// it. Actions that change it live beside this file (models.ts, chat.ts, …).

import type {
  AppInfo,
  Clip,
  ClusterPreview,
  ClusterStatus,
  Conversation,
  ConversationSummary,
  DownloadProgressEvent,
  GpuPlacement,
  ModelEntry,
  ModelKind,
  ModelVoiceKind,
  Voice,
} from "../api/types";
import { DEFAULT_SPEECH_SETTINGS, modelVoiceKind, type SpeakProgress, type SpeechSettingsForm } from "../lib/speech";
import type { Prefs } from "./prefs";
import type { ExplainedFailure, FailureAction } from "../lib/errors";

export type View = "chat" | "models" | "cluster" | "speech";

export interface Notice {
  id: number;
  message: string;
  /** "error" (the default) or "info": something to know that is not a failure. */
  tone?: "error" | "info";
  /** The technical text behind "Details". */
  detail?: string;
  /** The way out offered beside the message. */
  action?: FailureAction;
}

/** How far the reply being generated has read its prompt. */
export interface PromptProgress {
  read: number;
  total: number;
}

/** A conversation the model could not read whole: shown under its last message. */
export interface ContextOverflow {
  conversationId: string;
  message: string;
  /** False when the oldest turns were already left out and it still did not fit. */
  canDropOldest: boolean;
}

/** A picture in the composer: being kept (`id` null) or ready to send. */
export interface ComposerPicture {
  key: number;
  name: string;
  id: string | null;
}

/** A `load_model` stream in progress. */
export interface LoadState {
  id: string;
  fraction: number;
  message: string;
}

/** A `download_model` stream in progress (progress is null until the first event). */
export interface DownloadState {
  repoId: string;
  progress: DownloadProgressEvent | null;
}

/** What the Speech screen's form holds (kept while other screens are open). */
export interface SpeechForm extends SpeechSettingsForm {
  /** The speech model picked; null or a model no longer usable means the first usable one. */
  modelId: string | null;
  script: string;
  /**
   * The voice chosen for each speaker slot, in order of the speakers' numbers
   * ("" = none); a preset model's preset is the first.
   */
  voiceIds: string[];
}

/** A `speak` stream in progress: the audio made so far and the piece being spoken. */
export interface SpeakState extends SpeakProgress {
  /** The model is loading first (null once audio is being made). */
  loading: { fraction: number; message: string } | null;
}

export interface AppState {
  info: AppInfo | null;
  view: View;
  models: ModelEntry[];
  /** True once `list_models` answered at least once. */
  modelsReady: boolean;
  loadedModelId: string | null;
  /** Where the loaded model's layers run on this machine. */
  loadedGpu: GpuPlacement | null;
  loading: LoadState | null;
  download: DownloadState | null;
  importing: boolean;
  /** Saved conversations for the sidebar, newest first. */
  summaries: ConversationSummary[];
  /** Conversations opened in full, by id; includes an unsaved new one. */
  conversations: Record<string, Conversation>;
  selectedId: string | null;
  /** The conversation currently receiving a reply. */
  generatingId: string | null;
  /** Pictures attached in the composer, to go with the next message. */
  attached: ComposerPicture[];
  /** Set while a long prompt is being read (before the reply's first token). */
  promptProgress: PromptProgress | null;
  overflow: ContextOverflow | null;
  /** Why the last download failed (the welcome card shows it); null once another starts. */
  downloadFailure: ExplainedFailure | null;
  /** In a narrow window: the sidebar is open over the screen. */
  drawerOpen: boolean;
  notices: Notice[];
  prefs: Prefs;
  /** The last `cluster_status` answer (polled while the Cluster screen is open). */
  cluster: ClusterStatus | null;
  /** A `set_cluster_settings` call is running. */
  clusterSaving: boolean;
  /** A `scan_cluster` call is running. */
  clusterScanning: boolean;
  /** The last placement preview asked for (Cluster screen), with its model. */
  clusterPreview: { modelId: string; preview: ClusterPreview } | null;
  /** A `preview_cluster` call is running. */
  clusterPreviewing: boolean;
  /** Stored voice prompts, newest first. */
  voices: Voice[];
  /** True once `list_voices` answered at least once. */
  voicesReady: boolean;
  /** How many `add_voice` calls are running. */
  addingVoices: number;
  /** Stored clips, newest first. */
  clips: Clip[];
  /** True once `list_clips` answered at least once. */
  clipsReady: boolean;
  /** The clip made last in this session (the Speech screen's result). */
  latestClipId: string | null;
  speaking: SpeakState | null;
  speechForm: SpeechForm;
  /** The chat reply being read aloud (`key`: conversation id and message index), while its speech is made (`making`) and heard. */
  readingAloud: { key: string; making: boolean } | null;
}

export function initialState(prefs: Prefs): AppState {
  return {
    info: null,
    view: "chat",
    models: [],
    modelsReady: false,
    loadedModelId: null,
    loadedGpu: null,
    loading: null,
    download: null,
    importing: false,
    summaries: [],
    conversations: {},
    selectedId: null,
    generatingId: null,
    attached: [],
    promptProgress: null,
    overflow: null,
    downloadFailure: null,
    drawerOpen: false,
    notices: [],
    prefs,
    cluster: null,
    clusterSaving: false,
    clusterScanning: false,
    clusterPreview: null,
    clusterPreviewing: false,
    voices: [],
    voicesReady: false,
    addingVoices: 0,
    clips: [],
    clipsReady: false,
    latestClipId: null,
    speaking: null,
    speechForm: { modelId: null, script: "", voiceIds: [], ...DEFAULT_SPEECH_SETTINGS },
    readingAloud: null,
  };
}

// ---- Selectors ------------------------------------------------------------

/** A model's kind; a missing `kind` (an older backend) means a text model. */
export function modelKind(model: Pick<ModelEntry, "kind">): ModelKind {
  return model.kind ?? "text";
}

/** The complete models of one kind: text models chat, speech models speak, embedding models serve the API. */
export function completeModels(state: AppState, kind: ModelKind = "text"): ModelEntry[] {
  return state.models.filter((model) => model.status === "complete" && modelKind(model) === kind);
}

export function selectedConversation(state: AppState): Conversation | null {
  return state.selectedId === null ? null : (state.conversations[state.selectedId] ?? null);
}

/**
 * The model a conversation chats with: its own `model_id` while that model
 * is a complete text model in the library, else the loaded model, the
 * default model or the first complete text model.
 */
export function effectiveModelId(state: AppState, conversation: Conversation | null): string | null {
  const usable = new Set(completeModels(state).map((model) => model.id));
  const candidates = [
    conversation?.model_id ?? null,
    state.loadedModelId,
    state.info?.default_model_id ?? null,
    ...usable,
  ];
  return candidates.find((id): id is string => id !== null && usable.has(id)) ?? null;
}

/** Whether a conversation exists on the server (it appears in the sidebar list). */
export function isSaved(state: AppState, id: string): boolean {
  return state.summaries.some((summary) => summary.id === id);
}

/** The conversations in the order the sidebar lists them: a new one, not yet saved, first. */
export function conversationOrder(state: AppState): string[] {
  const saved = state.summaries.map((summary) => summary.id);
  const unsaved = state.selectedId !== null && !isSaved(state, state.selectedId) ? [state.selectedId] : [];
  return [...unsaved, ...saved];
}

/**
 * The model the Speech screen speaks with: the one picked while it is a
 * complete speech model, else the loaded model if it is one, else the first.
 */
export function speechModelId(state: AppState): string | null {
  const usable = new Set(completeModels(state, "speech").map((model) => model.id));
  const candidates = [state.speechForm.modelId, state.loadedModelId, ...usable];
  return candidates.find((id): id is string => id !== null && usable.has(id)) ?? null;
}

/** What the Speech screen's model speaks in (voice prompts when there is no model yet). */
export function speechVoiceKind(state: AppState): ModelVoiceKind {
  const id = speechModelId(state);
  const model = state.models.find((entry) => entry.id === id);
  return model ? modelVoiceKind(model) : "prompt";
}
