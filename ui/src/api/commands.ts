// Typed wrappers, one per command of docs/api.md. Features call these
// instead of naming commands and argument keys themselves.

import { call, stream } from "../transport";
import type {
  AppInfo,
  ChatDoneEvent,
  ChatEvent,
  ChatRequest,
  Clip,
  ClusterPreview,
  ClusterSettingsUpdate,
  ClusterStatus,
  Conversation,
  ConversationMatch,
  ConversationSummary,
  DownloadEvent,
  DownloadProgressEvent,
  HubFiles,
  HubModel,
  LoadEvent,
  LoadProgressEvent,
  ModelDoneEvent,
  ModelEntry,
  ModelList,
  PictureSource,
  PromptProgressEvent,
  ReplyPart,
  SpeakDoneEvent,
  SpeakEvent,
  SpeakRequest,
  StoredPicture,
  SpeakUpdate,
  Voice,
  VoiceSource,
  WavAudio,
} from "./types";

/** A download stream (`download_model`, `fetch_speech_tokenizer`): progress, then the model it made usable. */
async function download(
  command: string,
  args: object,
  onProgress: (progress: DownloadProgressEvent) => void,
  signal?: AbortSignal,
): Promise<ModelEntry> {
  const done = await stream<DownloadEvent>(
    command,
    args,
    (event) => {
      if (event.type === "progress") onProgress(event);
    },
    signal,
  );
  return (done as ModelDoneEvent).model;
}

export const api = {
  appInfo: () => call<AppInfo>("app_info"),

  listModels: () => call<ModelList>("list_models"),

  importModel: (path: string) => call<ModelEntry>("import_model", { path }),

  deleteModel: (id: string) => call<Record<string, never>>("delete_model", { id }),

  unloadModel: () => call<Record<string, never>>("unload_model"),

  /** Repositories of GGUF models on the hub matching `query`. */
  searchHub: (query: string) => call<{ models: HubModel[] }>("search_hub", { query }),

  /** The GGUF files of a hub repository. */
  hubFiles: (repoId: string) => call<HubFiles>("hub_files", { repo_id: repoId }),

  /**
   * Download a Hugging Face repository's model, or one GGUF `file` of it;
   * resolves with the new model.
   */
  downloadModel: (
    repoId: string,
    onProgress: (progress: DownloadProgressEvent) => void,
    signal?: AbortSignal,
    file?: string,
  ): Promise<ModelEntry> =>
    download(
      "download_model",
      file === undefined ? { repo_id: repoId } : { repo_id: repoId, file },
      onProgress,
      signal,
    ),

  /** Download the text tokenizer the VibeVoice folder `id` lacks; resolves with the model as it is then. */
  fetchSpeechTokenizer: (
    id: string,
    onProgress: (progress: DownloadProgressEvent) => void,
    signal?: AbortSignal,
  ): Promise<ModelEntry> => download("fetch_speech_tokenizer", { id }, onProgress, signal),

  /** Load a model into memory; resolves with the loaded model. */
  async loadModel(
    id: string,
    onProgress: (progress: LoadProgressEvent) => void,
    signal?: AbortSignal,
  ): Promise<ModelEntry> {
    const done = await stream<LoadEvent>(
      "load_model",
      { id },
      (event) => {
        if (event.type === "progress") onProgress(event);
      },
      signal,
    );
    return (done as ModelDoneEvent).model;
  },

  /** Generate a reply piece by piece (its reasoning, then its answer); resolves with its stats. */
  async chat(
    request: ChatRequest,
    onPiece: (text: string, part: ReplyPart) => void,
    signal?: AbortSignal,
    onNotice?: (message: string) => void,
    onPromptProgress?: (progress: PromptProgressEvent) => void,
  ) {
    const done = await stream<ChatEvent>(
      "chat",
      request,
      (event) => {
        if (event.type === "token") onPiece(event.text, "answer");
        else if (event.type === "reasoning") onPiece(event.text, "reasoning");
        else if (event.type === "notice") onNotice?.(event.message);
        else if (event.type === "progress") onPromptProgress?.(event);
      },
      signal,
    );
    return (done as ChatDoneEvent).stats;
  },

  listConversations: () => call<{ conversations: ConversationSummary[] }>("list_conversations"),

  getConversation: (id: string) => call<Conversation>("get_conversation", { id }),

  saveConversation: (conversation: Conversation) => call<Record<string, never>>("save_conversation", { conversation }),

  deleteConversation: (id: string) => call<Record<string, never>>("delete_conversation", { id }),

  searchConversations: (query: string) =>
    call<{ conversations: ConversationMatch[] }>("search_conversations", { query }),

  clusterStatus: () => call<ClusterStatus>("cluster_status"),

  /** Change only the fields present; resolves with the status after the change. */
  setClusterSettings: (update: ClusterSettingsUpdate) => call<ClusterStatus>("set_cluster_settings", update),

  /** A new random cluster key (not saved: the form shows it, Save stores it). */
  generateClusterKey: () => call<{ key: string }>("generate_cluster_key"),

  /** Look for workers for `discovery_timeout_s` and try each (master only); takes a few seconds. */
  scanCluster: () => call<ClusterStatus>("scan_cluster"),

  /** The plans for a text model over the workers that answer now, without loading it (master only). */
  previewCluster: (modelId: string) => call<ClusterPreview>("preview_cluster", { model_id: modelId }),

  /**
   * Keep a picture for a conversation: a file on the serving machine or an
   * upload. It is checked by decoding it; anything else rejects with a
   * message naming the file.
   */
  addPicture: (source: PictureSource) => call<StoredPicture>("add_picture", source),

  /** A stored picture's thumbnail (a JPEG at most 320 pixels on a side). */
  pictureThumbnail: (id: string) => call<{ jpeg_base64: string }>("picture_thumbnail", { id }),

  /** The stored voices (prompts and presets), newest first. */
  listVoices: () => call<{ voices: Voice[] }>("list_voices"),

  /**
   * Store a voice from a file on the serving machine (`path`) or an upload
   * (`file_base64`): a WAV becomes a voice prompt, a VibeVoice-Realtime
   * preset a preset. Any other file rejects with a message naming it.
   */
  addVoice: (source: VoiceSource) => call<Voice>("add_voice", source),

  /** Set what a prompt voice says (blank clears it); resolves with the voice. */
  setVoiceTranscript: (id: string, transcript: string) => call<Voice>("set_voice_transcript", { id, transcript }),

  deleteVoice: (id: string) => call<Record<string, never>>("delete_voice", { id }),

  /** The stored 24 kHz prompt as a WAV file (a preset has none). */
  voiceAudio: (id: string) => call<WavAudio>("voice_audio", { id }),

  /**
   * Speak a script in the given voices: `onUpdate` sees the model loading
   * (if it must), then the progress and each chunk of audio as it is made;
   * resolves with the stored clip.
   */
  async speak(request: SpeakRequest, onUpdate: (event: SpeakUpdate) => void, signal?: AbortSignal): Promise<Clip> {
    const done = await stream<SpeakEvent>(
      "speak",
      request,
      (event) => {
        if (event.type === "loading" || event.type === "progress" || event.type === "audio") onUpdate(event);
      },
      signal,
    );
    return (done as SpeakDoneEvent).clip;
  },

  /**
   * Speak a script without keeping it (the chat's Read aloud): `onUpdate`
   * sees the loading, the progress and the audio as it is made.
   */
  async readAloud(request: SpeakRequest, onUpdate: (event: SpeakUpdate) => void, signal?: AbortSignal): Promise<void> {
    await stream<SpeakEvent>(
      "speak",
      { ...request, keep_clip: false },
      (event) => {
        if (event.type === "loading" || event.type === "progress" || event.type === "audio") onUpdate(event);
      },
      signal,
    );
  },

  /** The stored clips, newest first. */
  listClips: () => call<{ clips: Clip[] }>("list_clips"),

  /** A clip as a 16-bit PCM mono 24 kHz WAV file. */
  clipAudio: (id: string) => call<WavAudio>("clip_audio", { id }),

  deleteClip: (id: string) => call<Record<string, never>>("delete_clip", { id }),
};

/** The API's shape, so state code and tests can take a stand-in. */
export type Api = typeof api;
