// An in-memory stand-in for the Api, for tests of the state logic. Streams
// are driven by the test through `chatScript`, `loadScript`, `speakScript`, … hooks.
// Also a stand-in for the live player of speech (`fakeLiveSpeech`).

import { vi } from "vitest";
import type { Api } from "../src/api/commands";
import type {
  ChatRequest,
  Clip,
  ClusterPreview,
  ClusterSettingsUpdate,
  ClusterStatus,
  Conversation,
  DownloadProgressEvent,
  HubFile,
  LoadProgressEvent,
  ModelEntry,
  PictureSource,
  PromptProgressEvent,
  ReplyPart,
  ReplyStats,
  SpeakAudioEvent,
  SpeakRequest,
  SpeakUpdate,
  StoredPicture,
  Voice,
  VoiceKind,
  VoiceSource,
} from "../src/api/types";
import { base64ToBytes, bytesToBase64 } from "../src/lib/base64";
import type { LiveSpeech } from "../src/state/speech";
import { buildWav } from "./wav-builder";

export function model(id: string, overrides: Partial<ModelEntry> = {}): ModelEntry {
  return {
    id,
    name: id,
    source: "hf-cache",
    path: `/models/${id}`,
    architecture: "llama",
    parameters: 135e6,
    dtype: "BF16",
    size_bytes: 270e6,
    status: "complete",
    problem: null,
    ...overrides,
  };
}

export const STATS: ReplyStats = {
  prompt_tokens: 10,
  completion_tokens: 3,
  ttft_s: 0.1,
  decode_tok_s: 50,
  finish_reason: "eos",
};

/** How a fake chat stream behaves: tokens to send, then done or failure. */
export type ChatScript = (
  request: ChatRequest,
  onToken: (text: string, part: ReplyPart) => void,
  signal: AbortSignal | undefined,
  onPromptProgress?: (progress: PromptProgressEvent) => void,
) => Promise<ReplyStats>;

export const replyWith =
  (...tokens: string[]): ChatScript =>
  async (_request, onToken) => {
    for (const token of tokens) onToken(token, "answer");
    return STATS;
  };

/** Sends `tokens`, then waits until aborted. */
export const replyUntilStopped =
  (...tokens: string[]): ChatScript =>
  (_request, onToken, signal) =>
    new Promise((_, reject) => {
      for (const token of tokens) onToken(token, "answer");
      signal?.addEventListener("abort", () => reject(new DOMException("stopped", "AbortError")));
    });

export function voice(id: string, overrides: Partial<Voice> = {}): Voice {
  return {
    id,
    name: id,
    kind: "prompt",
    duration_s: 5,
    sample_rate: 24000,
    created_at: "2024-05-01T12:00:00Z",
    notice: null,
    ...overrides,
  };
}

/** A voice preset: no audio, so no length or sample rate. */
export function preset(id: string, overrides: Partial<Voice> = {}): Voice {
  return voice(id, { kind: "preset", duration_s: null, sample_rate: null, ...overrides });
}

export function clip(id: string, overrides: Partial<Clip> = {}): Clip {
  return {
    id,
    script: "Speaker 1: Hello.",
    voice_ids: ["v1"],
    model_id: "vv",
    duration_s: 2,
    frames: 15,
    seed: 42,
    cfg_scale: 1.3,
    steps: 10,
    end: "end_of_text",
    created_at: "2024-05-01T12:30:05Z",
    ...overrides,
  };
}

/** How a fake speak stream behaves: events to send, then a clip or a failure. */
export type SpeakScript = (
  request: SpeakRequest,
  onProgress: (event: SpeakUpdate) => void,
  signal: AbortSignal | undefined,
) => Promise<Clip>;

/** An `audio` event of these samples (−1 … 1), as 16-bit PCM at 24 kHz. */
export function audioEvent(samples: readonly number[]): SpeakAudioEvent {
  const bytes = new Uint8Array(2 * samples.length);
  const view = new DataView(bytes.buffer);
  samples.forEach((sample, i) =>
    view.setInt16(2 * i, Math.max(-32768, Math.min(32767, Math.round(sample * 32768))), true),
  );
  return { type: "audio", pcm16_base64: bytesToBase64(bytes), sample_rate: 24000 };
}

/** Loads, sends two steps of audio, and answers a clip of the request. */
export const speakAndFinish: SpeakScript = async (request, onProgress) => {
  onProgress({ type: "loading", fraction: 0.5, message: "Reading weights" });
  onProgress({ type: "progress", frames: 8, seconds: 1.07 });
  onProgress(audioEvent([0.5, -0.5]));
  onProgress({ type: "progress", frames: 15, seconds: 2 });
  onProgress(audioEvent([0.25]));
  return clip("c-new", {
    script: request.script,
    voice_ids: request.voice_ids,
    model_id: request.model_id,
    seed: request.seed ?? 7,
  });
};

/** Sends some audio, then waits until aborted. */
export const speakUntilStopped: SpeakScript = (_request, onProgress, signal) =>
  new Promise((_, reject) => {
    onProgress({ type: "progress", frames: 4, seconds: 0.53 });
    onProgress(audioEvent([0.5]));
    signal?.addEventListener("abort", () => reject(new DOMException("stopped", "AbortError")));
  });

/** A cluster status with no key (role "off"); `settings` merges into its settings. */
export function clusterStatus(
  overrides: Partial<Omit<ClusterStatus, "settings">> & { settings?: Partial<ClusterStatus["settings"]> } = {},
): ClusterStatus {
  const { settings, ...rest } = overrides;
  return {
    settings: {
      key_set: false,
      cluster_id: null,
      key_warning: null,
      key_storage: null,
      from_command_line: false,
      join_as_worker: false,
      worker_name: "this-machine",
      worker_port: 0,
      mdns_interfaces: [],
      discovery_timeout_s: 3,
      worker_addresses: [],
      context_length: 0,
      gpu: "off",
      ...settings,
    },
    role: "off",
    worker: null,
    worker_error: null,
    machines: [],
    run: null,
    gpus: {
      auto: { device: null, unavailable: "no GPU driver found (Vulkan, Metal or DX12)" },
      on: { device: null, unavailable: "no GPU driver found (Vulkan, Metal or DX12)" },
    },
    ...rest,
  };
}

export function createFakeApi(
  initial: { models?: ModelEntry[]; conversations?: Conversation[]; voices?: Voice[]; clips?: Clip[] } = {},
) {
  const server = {
    models: [...(initial.models ?? [])],
    loaded: null as string | null,
    conversations: new Map((initial.conversations ?? []).map((c) => [c.id, structuredClone(c)])),
    chatScript: replyWith("Hello", " there") as ChatScript,
    /** Hub repositories and their GGUF files, by id. */
    hubRepos: {} as Record<string, HubFile[]>,
    downloadScript: null as
      null | ((onProgress: (p: DownloadProgressEvent) => void, signal?: AbortSignal) => Promise<ModelEntry>),
    cluster: clusterStatus(),
    loadScript: async (id: string, onProgress: (p: LoadProgressEvent) => void) => {
      onProgress({ type: "progress", fraction: 0.5, message: "Reading weights" });
      return model(id);
    },
    voices: [...(initial.voices ?? [])],
    clips: [...(initial.clips ?? [])],
    /** The WAV of every voice and clip, by id (a short tone unless set). */
    audio: new Map<string, Uint8Array>(),
    /** The notice the next added voice gets (e.g. it was cut at 60 s). */
    nextVoiceNotice: null as string | null,
    speakScript: speakAndFinish as SpeakScript,
    /** Kept pictures' bytes, by id. */
    pictures: new Map<string, Uint8Array>(),
  };
  let voiceCount = 0;

  /**
   * Checks an added voice like the backend, by its bytes: a WAV is a prompt,
   * a `torch.save` zip a preset; anything else is refused, naming the file.
   */
  function acceptVoice(source: VoiceSource): Voice {
    const file = "path" in source ? source.path : (source.file_name ?? `${source.name}.wav`);
    const bytes =
      "path" in source
        ? filesOnDisk(source.path)
        : base64ToBytes("file_base64" in source ? source.file_base64 : source.wav_base64);
    const kind = bytes ? voiceFileKind(bytes) : null;
    if (!bytes || kind === null) throw new Error(`${file}: neither a WAV file nor a voice preset`);
    const id = `v-added-${++voiceCount}`;
    const fields = { name: source.name, notice: server.nextVoiceNotice };
    const entry = kind === "prompt" ? voice(id, fields) : preset(id, fields);
    server.nextVoiceNotice = null;
    if (kind === "prompt") server.audio.set(entry.id, bytes);
    server.voices.unshift(entry);
    return entry;
  }

  /** Keeps a picture like the backend: a PNG by its first bytes, else refused naming the file; one id per content. */
  function acceptPicture(source: PictureSource): StoredPicture {
    const file = "path" in source ? source.path : source.file_name;
    const bytes = "path" in source ? filesOnDisk(source.path) : base64ToBytes(source.file_base64);
    const png = bytes !== null && [0x89, 0x50, 0x4e, 0x47].every((b, i) => bytes[i] === b);
    if (!png) throw new Error(`${file}: not a PNG, JPEG, WebP or GIF picture`);
    const id = [...bytes]
      .reduce((hash, b) => (hash * 31 + b) >>> 0, 7)
      .toString(16)
      .padStart(64, "0");
    server.pictures.set(id, bytes);
    return { id, width: 1, height: 1 };
  }

  function audioOf(id: string, known: boolean) {
    if (!known) throw new Error(`no such item ${id}`);
    if (server.voices.some((v) => v.id === id && v.kind === "preset"))
      throw new Error(`${id} is a preset: it has no audio`);
    return { wav_base64: bytesToBase64(server.audio.get(id) ?? buildWav([0, 0.25, -0.25, 0.75, -1, 0.5])) };
  }

  const api: Api = {
    appInfo: vi.fn(async () => ({ version: "0.1.0", data_dir: "/data", default_model_id: null })),
    listModels: vi.fn(async () => ({
      models: structuredClone(server.models),
      loaded: server.loaded,
      loaded_gpu: null,
    })),
    importModel: vi.fn(async (path: string) => {
      if (!path.endsWith(".gguf")) throw new Error(`${path} is not a model`);
      const entry = model(`file:${path}`, { source: "imported", path });
      server.models.push(entry);
      return entry;
    }),
    deleteModel: vi.fn(async (id: string) => {
      server.models = server.models.filter((m) => m.id !== id);
      return {};
    }),
    unloadModel: vi.fn(async () => {
      server.loaded = null;
      return {};
    }),
    downloadModel: vi.fn(async (repoId: string, onProgress, signal) => {
      if (!server.downloadScript) throw new Error(`no download for ${repoId}`);
      const entry = await server.downloadScript(onProgress, signal);
      server.models.push(entry);
      return entry;
    }),
    fetchSpeechTokenizer: vi.fn(async (id: string, onProgress) => {
      const entry = server.models.find((m) => m.id === id);
      if (!entry) throw new Error(`no model ${id}`);
      onProgress({
        type: "progress",
        file: "tokenizer.json",
        downloaded_bytes: 5,
        total_bytes: 10,
        bytes_per_s: 1,
        eta_s: 5,
      });
      entry.status = "complete";
      entry.problem = null;
      return structuredClone(entry);
    }),
    loadModel: vi.fn(async (id: string, onProgress) => {
      const entry = await server.loadScript(id, onProgress);
      server.loaded = id;
      return entry;
    }),
    chat: vi.fn((request: ChatRequest, onToken, signal, _onNotice, onPromptProgress) =>
      server.chatScript(request, onToken, signal, onPromptProgress),
    ),
    listConversations: vi.fn(async () => ({
      conversations: [...server.conversations.values()]
        .sort((a, b) => b.updated_at.localeCompare(a.updated_at))
        .map(({ id, title, updated_at }) => ({ id, title, updated_at })),
    })),
    getConversation: vi.fn(async (id: string) => {
      const found = server.conversations.get(id);
      if (!found) throw new Error(`no conversation ${id}`);
      return structuredClone(found);
    }),
    saveConversation: vi.fn(async (conversation: Conversation) => {
      server.conversations.set(conversation.id, structuredClone(conversation));
      return {};
    }),
    deleteConversation: vi.fn(async (id: string) => {
      server.conversations.delete(id);
      return {};
    }),
    searchHub: vi.fn(async (query: string) => ({
      models: Object.keys(server.hubRepos)
        .filter((id) => id.toLowerCase().includes(query.trim().toLowerCase()))
        .map((repo_id) => ({ repo_id, downloads: 10, likes: 1 })),
    })),
    hubFiles: vi.fn(async (repoId: string) => {
      const files = server.hubRepos[repoId];
      if (!files) throw new Error(`${repoId} was not found on the hub`);
      return { files, picture_reader: null, split_files: 0 };
    }),
    searchConversations: vi.fn(async (query: string) => {
      const needle = query.trim().toLowerCase();
      const texts = (c: Conversation) => [c.title, ...c.messages.map((m) => m.content)];
      return {
        conversations: [...server.conversations.values()]
          .filter((c) => texts(c).some((t) => t.toLowerCase().includes(needle)))
          .map(({ id, title, updated_at }) => ({ id, title, updated_at, snippet: title })),
      };
    }),
    clusterStatus: vi.fn(async () => structuredClone(server.cluster)),
    setClusterSettings: vi.fn(async (update: ClusterSettingsUpdate) => {
      const { key, ...rest } = update;
      const settings = { ...server.cluster.settings, ...rest, from_command_line: false };
      if (key !== undefined) {
        settings.key_set = key !== "";
        settings.cluster_id = key.startsWith("cake1-") ? key.slice(6, 14) : null;
        settings.key_warning = key === "" || key.startsWith("cake1-") ? null : "this typed key is weak";
        settings.key_storage = key === "" ? null : "keyring";
      }
      if (settings.join_as_worker && !settings.key_set) throw new Error("set a cluster key before joining as a worker");
      const role = !settings.key_set ? "off" : settings.join_as_worker ? "worker" : "master";
      server.cluster = { ...server.cluster, settings, role };
      return structuredClone(server.cluster);
    }),
    generateClusterKey: vi.fn(async () => ({ key: "cake1-ab23cd45-bakiro-tunela-mosipa-dukefo-rinavu-lesoti-paguhe" })),
    scanCluster: vi.fn(async () => {
      if (server.cluster.role !== "master")
        throw new Error("set a cluster key (and leave worker mode) to look for workers");
      return structuredClone(server.cluster);
    }),
    previewCluster: vi.fn(async (modelId: string): Promise<ClusterPreview> => {
      if (server.cluster.role !== "master")
        throw new Error("set a cluster key (and leave worker mode) to preview plans");
      if (!server.models.some((m) => m.id === modelId))
        throw new Error(`no model with id \`${modelId}\` in the library`);
      return {
        options: [
          {
            label: "this machine alone",
            machines: ["master"],
            refused: null,
            plan: null,
            prediction: {
              decode_tokens_per_second: 190,
              link_seconds_per_token: 0,
              decode_limit: { kind: "memory", machine: "master", seconds: 0.005 },
              prompt_tokens: 512,
              first_token_seconds: 0.6,
              prompt_limit: { kind: "compute", machine: "master", seconds: 0.6 },
            },
          },
        ],
        chosen: 0,
        reason: "this machine alone: 190.0 tok/s",
      };
    }),
    listVoices: vi.fn(async () => ({ voices: structuredClone(server.voices) })),
    addVoice: vi.fn(async (source: VoiceSource) => structuredClone(acceptVoice(source))),
    addPicture: vi.fn(async (source: PictureSource) => acceptPicture(source)),
    pictureThumbnail: vi.fn(async (id: string) => {
      const bytes = server.pictures.get(id);
      if (!bytes) throw new Error(`no picture ${id}`);
      return { jpeg_base64: bytesToBase64(bytes) };
    }),
    setVoiceTranscript: vi.fn(async (id: string, transcript: string) => {
      const stored = server.voices.find((v) => v.id === id);
      if (!stored) throw new Error(`no voice ${id}`);
      stored.transcript = transcript.trim() === "" ? null : transcript.trim();
      return structuredClone(stored);
    }),
    deleteVoice: vi.fn(async (id: string) => {
      if (!server.voices.some((v) => v.id === id)) throw new Error(`no voice ${id}`);
      server.voices = server.voices.filter((v) => v.id !== id);
      return {};
    }),
    voiceAudio: vi.fn(async (id: string) =>
      audioOf(
        id,
        server.voices.some((v) => v.id === id),
      ),
    ),
    speak: vi.fn(async (request: SpeakRequest, onProgress, signal) => {
      const made = await server.speakScript(request, onProgress, signal);
      server.clips.unshift(made);
      server.loaded = request.model_id;
      return structuredClone(made);
    }),
    readAloud: vi.fn(async (request: SpeakRequest, onProgress, signal) => {
      await server.speakScript(request, onProgress, signal);
      server.loaded = request.model_id;
    }),
    listClips: vi.fn(async () => ({ clips: structuredClone(server.clips) })),
    clipAudio: vi.fn(async (id: string) =>
      audioOf(
        id,
        server.clips.some((c) => c.id === id),
      ),
    ),
    deleteClip: vi.fn(async (id: string) => {
      if (!server.clips.some((c) => c.id === id)) throw new Error(`no clip ${id}`);
      server.clips = server.clips.filter((c) => c.id !== id);
      return {};
    }),
  };

  return { api, server };
}

/** The serving machine's files, by extension: a WAV, a preset, or nothing readable. */
function filesOnDisk(path: string): Uint8Array | null {
  if (path.endsWith(".wav")) return buildWav([0, 0.5, -0.5]);
  if (path.endsWith(".pt")) return PRESET_BYTES;
  return null;
}

/** The start of a `torch.save` file: a zip archive. */
export const PRESET_BYTES = new Uint8Array([0x50, 0x4b, 0x03, 0x04, 0, 0, 0, 0]);

function voiceFileKind(bytes: Uint8Array): VoiceKind | null {
  const magic = String.fromCharCode(...bytes.subarray(0, 4));
  return magic === "RIFF" ? "prompt" : magic === "PK\x03\x04" ? "preset" : null;
}

/** A stand-in for the live player of speech: what it was asked, in order, and the samples it got. */
export function fakeLiveSpeech() {
  const calls: string[] = [];
  const played: { samples: number[]; sampleRate: number }[] = [];
  const live: LiveSpeech = {
    prime: () => void calls.push("prime"),
    begin: () => void calls.push("begin"),
    play: (samples, sampleRate) => {
      calls.push("play");
      played.push({ samples: Array.from(samples), sampleRate });
    },
    finish: () => void calls.push("finish"),
    stop: () => void calls.push("stop"),
  };
  return { live, calls, played };
}

/** A Map-backed localStorage stand-in. */
export function memoryStorage() {
  const data = new Map<string, string>();
  return {
    getItem: (key: string) => data.get(key) ?? null,
    setItem: (key: string, value: string) => void data.set(key, value),
    removeItem: (key: string) => void data.delete(key),
  };
}
