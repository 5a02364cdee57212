// The whole UI state in one object, plus selectors that derive values from
// it. Actions that change it live beside this file (models.ts, chat.ts, …).

import type {
  AppInfo,
  ClusterStatus,
  Conversation,
  ConversationSummary,
  DownloadProgressEvent,
  ModelEntry,
} from "../api/types";
import type { Prefs } from "./prefs";

export type View = "chat" | "models" | "cluster";

export interface Notice {
  id: number;
  message: string;
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

export interface AppState {
  info: AppInfo | null;
  view: View;
  models: ModelEntry[];
  /** True once `list_models` answered at least once. */
  modelsReady: boolean;
  loadedModelId: string | null;
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
  notices: Notice[];
  prefs: Prefs;
  /** The last `cluster_status` answer (polled while the Cluster screen is open). */
  cluster: ClusterStatus | null;
  /** A `set_cluster_settings` call is running. */
  clusterSaving: boolean;
  /** A `scan_cluster` call is running. */
  clusterScanning: boolean;
}

export function initialState(prefs: Prefs): AppState {
  return {
    info: null,
    view: "chat",
    models: [],
    modelsReady: false,
    loadedModelId: null,
    loading: null,
    download: null,
    importing: false,
    summaries: [],
    conversations: {},
    selectedId: null,
    generatingId: null,
    notices: [],
    prefs,
    cluster: null,
    clusterSaving: false,
    clusterScanning: false,
  };
}

// ---- Selectors ------------------------------------------------------------

export function completeModels(state: AppState): ModelEntry[] {
  return state.models.filter((model) => model.status === "complete");
}

export function selectedConversation(state: AppState): Conversation | null {
  return state.selectedId === null ? null : (state.conversations[state.selectedId] ?? null);
}

/**
 * The model a conversation chats with: its own `model_id` while that model
 * is complete in the library, else the loaded model, the default model or
 * the first complete one.
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
