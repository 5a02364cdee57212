// Pure helpers for the Speech screen: what a model speaks in (voice
// prompts or a preset), reading a script's speakers the way the backend
// does, checking the form before `speak`, and small texts.

import type { Clip, ClipEnd, ModelEntry, ModelVoiceKind, SpeakRequest, Voice, VoiceKind } from "../api/types";
import { formatSeconds } from "./format";

// ---- Voice kinds -------------------------------------------------------------

/** A voice's kind; a missing `kind` (an older backend) means a prompt. */
export function voiceKind(voice: Pick<Voice, "kind">): VoiceKind {
  return voice.kind === "preset" ? "preset" : "prompt";
}

/** What a speech model speaks in; a missing `voice` (an older backend) means voice prompts. */
export function modelVoiceKind(model: Pick<ModelEntry, "voice">): ModelVoiceKind {
  return model.voice === "preset" || model.voice === "transcribed_prompt" ? model.voice : "prompt";
}

/** Whether a model speaking in `kind` reads plain text in one voice (no speaker lines). */
export function readsPlainText(kind: ModelVoiceKind): boolean {
  return kind !== "prompt";
}

/** The voices of one kind, in their order. */
export function voicesOfKind(voices: readonly Voice[], kind: VoiceKind): Voice[] {
  return voices.filter((voice) => voiceKind(voice) === kind);
}

/** What a model of each kind needs, in one line. */
export const MODEL_NEEDS: Record<ModelVoiceKind, string> = {
  prompt: "VibeVoice-1.5B: a WAV voice prompt per speaker",
  preset: "VibeVoice-Realtime: one voice preset",
  transcribed_prompt: "LuxTTS: one WAV voice prompt and the words it says (English)",
};

// ---- Scripts -----------------------------------------------------------------

/** At most this many speakers in one script (the backend refuses more). */
export const MAX_SPEAKERS = 4;

/**
 * `Speaker N:` at the start of a (trimmed) line, any case. As in the
 * backend, "speaker" and the number are separated by whitespace.
 */
const SPEAKER_LINE = /^speaker\s+(\d+)\s*:(.*)$/i;

export interface ScriptLine {
  /** 0-based, after the shift (see `scriptLines`). */
  speaker: number;
  text: string;
}

/**
 * The `Speaker N: text` lines of a script, as the backend reads them:
 * other lines are skipped, and when no speaker is numbered 0 every number
 * is shifted down by one (so "Speaker 1" and "Speaker 2" are 0 and 1).
 */
export function scriptLines(script: string): ScriptLine[] {
  const lines: ScriptLine[] = [];
  for (const raw of script.split("\n")) {
    const match = SPEAKER_LINE.exec(raw.trim());
    if (match) lines.push({ speaker: Number(match[1]), text: match[2].trim() });
  }
  if (lines.length > 0 && lines.every((line) => line.speaker > 0)) {
    for (const line of lines) line.speaker -= 1;
  }
  return lines;
}

export interface ScriptSpeakers {
  /**
   * The speakers' numbers as written, ascending and distinct: `voice_ids[k]`
   * is the voice of `numbers[k]`. Plain text without speaker lines is one
   * speaker, shown as 1; an empty script has none.
   */
  numbers: number[];
  /** `numbers.length`. */
  count: number;
  /** The script has text but no `Speaker N:` lines: one speaker reads it all. */
  plain: boolean;
}

export function scriptSpeakers(script: string): ScriptSpeakers {
  const numbers: number[] = [];
  for (const raw of script.split("\n")) {
    const match = SPEAKER_LINE.exec(raw.trim());
    if (match) numbers.push(Number(match[1]));
  }
  if (numbers.length === 0) {
    const plain = script.trim() !== "";
    return { numbers: plain ? [1] : [], count: plain ? 1 : 0, plain };
  }
  const distinct = [...new Set(numbers)].sort((a, b) => a - b);
  return { numbers: distinct, count: distinct.length, plain: false };
}

/** How many distinct speakers a script has (plain text: 1, empty: 0). */
export function speakerCount(script: string): number {
  return scriptSpeakers(script).count;
}

// ---- The form ----------------------------------------------------------------

/** The generation settings as typed (text fields; empty = the model's default / none). */
export interface SpeechSettingsForm {
  /** Empty: the model's default (see `SPEECH_DEFAULTS`). */
  cfgScale: string;
  /** Empty: the model's default. */
  steps: string;
  /** Empty: a random seed. */
  seed: string;
  /** Empty: no limit beyond the model's own. */
  maxSeconds: string;
}

/**
 * The CFG scale and steps a model uses when `speak` leaves them out, by what
 * it speaks in. The form sends them only when typed.
 */
export const SPEECH_DEFAULTS: Record<ModelVoiceKind, { cfgScale: number; steps: number }> = {
  prompt: { cfgScale: 1.3, steps: 10 },
  preset: { cfgScale: 1.5, steps: 5 },
  transcribed_prompt: { cfgScale: 3, steps: 4 },
};

export const DEFAULT_SPEECH_SETTINGS: SpeechSettingsForm = { cfgScale: "", steps: "", seed: "", maxSeconds: "" };

type Settings = Pick<SpeakRequest, "cfg_scale" | "steps" | "seed" | "max_seconds">;

function numberOf(text: string): number | null {
  const trimmed = text.trim();
  if (trimmed === "") return null;
  const value = Number(trimmed);
  return Number.isFinite(value) ? value : NaN;
}

/** The settings to send (only those typed), or the first problem with what was typed. */
export function speakSettings(form: SpeechSettingsForm): { settings: Settings; problem: string | null } {
  const settings: Settings = {};
  const cfg = numberOf(form.cfgScale);
  if (cfg !== null) {
    if (!(cfg > 0)) return { settings, problem: "CFG scale must be a number above 0 (or empty for the default)." };
    settings.cfg_scale = cfg;
  }

  const steps = numberOf(form.steps);
  if (steps !== null) {
    if (!Number.isInteger(steps) || steps < 1) {
      return { settings, problem: "Steps must be a whole number of at least 1 (or empty for the default)." };
    }
    settings.steps = steps;
  }

  const seed = numberOf(form.seed);
  if (seed !== null) {
    if (!Number.isSafeInteger(seed) || seed < 0) {
      return { settings, problem: "The seed must be a whole number of 0 or more (or empty for a random one)." };
    }
    settings.seed = seed;
  }

  const maxSeconds = numberOf(form.maxSeconds);
  if (maxSeconds !== null) {
    if (!(maxSeconds > 0)) return { settings, problem: "Max seconds must be above 0 (or empty for no limit)." };
    settings.max_seconds = maxSeconds;
  }
  return { settings, problem: null };
}

export interface SpeechPlanInput {
  modelId: string | null;
  /** What the model speaks in. */
  kind: ModelVoiceKind;
  script: string;
  /** The voice chosen for each speaker slot ("" = none yet); a preset model reads only the first. */
  voiceIds: readonly string[];
  /** The voices that exist: a chosen voice that was deleted, or is of the other kind, counts as none. */
  voices: readonly Voice[];
  settings: SpeechSettingsForm;
}

/** The `speak` request for the form, or why it cannot be sent yet. */
export function planSpeech(input: SpeechPlanInput): { request: SpeakRequest | null; problem: string | null } {
  const refuse = (problem: string) => ({ request: null, problem });
  if (input.modelId === null) return refuse("Choose a speech model.");
  if (input.script.trim() === "")
    return refuse(readsPlainText(input.kind) ? "Write the text to speak." : "Write a script to speak.");
  const choose = { prompt: promptVoices, preset: presetVoice, transcribed_prompt: transcribedVoice }[input.kind];
  const voices = choose(input);
  if ("problem" in voices) return refuse(voices.problem);
  const { settings, problem } = speakSettings(input.settings);
  if (problem !== null) return refuse(problem);
  return {
    request: { model_id: input.modelId, script: input.script, voice_ids: voices.voiceIds, ...settings },
    problem: null,
  };
}

type VoiceChoice = { voiceIds: string[] } | { problem: string };

/** A prompt model: the voice prompt of each speaker of the script. */
function promptVoices(input: SpeechPlanInput): VoiceChoice {
  const speakers = scriptSpeakers(input.script);
  if (speakers.count > MAX_SPEAKERS) {
    return { problem: `The script has ${speakers.count} speakers; at most ${MAX_SPEAKERS} are supported.` };
  }
  const usable = new Set(voicesOfKind(input.voices, "prompt").map((voice) => voice.id));
  if (usable.size === 0) return { problem: "Add a voice first: a WAV recording of someone speaking." };
  const voiceIds: string[] = [];
  for (let slot = 0; slot < speakers.count; slot++) {
    const id = input.voiceIds[slot] ?? "";
    if (!usable.has(id)) return { problem: `Choose a voice for Speaker ${speakers.numbers[slot]}.` };
    voiceIds.push(id);
  }
  return { voiceIds };
}

/** A preset model: its one voice preset. */
function presetVoice(input: SpeechPlanInput): VoiceChoice {
  const usable = new Set(voicesOfKind(input.voices, "preset").map((voice) => voice.id));
  if (usable.size === 0) return { problem: "Add a voice preset first: VibeVoice-Realtime speaks in one." };
  const id = input.voiceIds[0] ?? "";
  return usable.has(id) ? { voiceIds: [id] } : { problem: "Choose a voice preset." };
}

/** A LuxTTS model: one voice prompt whose words are known. */
function transcribedVoice(input: SpeechPlanInput): VoiceChoice {
  const prompts = voicesOfKind(input.voices, "prompt");
  if (prompts.length === 0) return { problem: "Add a voice first: a WAV recording of someone speaking." };
  const voice = prompts.find((prompt) => prompt.id === (input.voiceIds[0] ?? ""));
  if (voice === undefined) return { problem: "Choose a voice." };
  if (!voice.transcript) {
    return { problem: `Add what “${voice.name}” says: LuxTTS reads the voice's transcript beside its audio.` };
  }
  return { voiceIds: [voice.id] };
}

// ---- Progress ----------------------------------------------------------------

/** How far a `speak` stream is: audio made so far, and the piece of the script being spoken (1-based). */
export interface SpeakProgress {
  frames: number;
  seconds: number;
  piece: number;
  pieces: number;
  /** (LuxTTS, which makes a piece all at once) the piece's sampling steps done, of how many. */
  step?: number | null;
  steps?: number | null;
}

/**
 * "Starting…", "37 frames · 4.93 s of audio", "Piece 2 of 5 · 37 frames ·
 * 4.93 s of audio", or, while LuxTTS samples a piece, "Piece 2 of 5 · step
 * 3 of 4 · …".
 */
export function speakProgressText(progress: SpeakProgress): string {
  const { frames, seconds, piece, pieces, step, steps } = progress;
  if (frames === 0 && step == null) return "Starting…";
  const parts: string[] = [];
  if (pieces > 1) parts.push(`Piece ${piece} of ${pieces}`);
  if (step != null && steps != null && step < steps) parts.push(`step ${step} of ${steps}`);
  if (frames > 0) parts.push(`${frames} ${frames === 1 ? "frame" : "frames"} · ${formatSeconds(seconds)} of audio`);
  if (parts.length === 0) return "Starting…";
  const text = parts.join(" · ");
  return text.charAt(0).toUpperCase() + text.slice(1);
}

/**
 * How much of the bar to fill: the share of `maxSeconds` made when there is
 * a limit, else the pieces done of a long script (and the steps done of the
 * current piece, when they are reported); null when unknown.
 */
export function speakProgressFraction(progress: SpeakProgress, maxSeconds: number | null): number | null {
  if (maxSeconds !== null) return progress.seconds / maxSeconds;
  const { piece, pieces, step, steps } = progress;
  const within = step != null && steps ? step / steps : null;
  if (pieces > 1) return (piece - 1 + (within ?? 0)) / pieces;
  return within;
}

// ---- Texts -------------------------------------------------------------------

/** A file's name without folders and extension: "/a/b/Alice.wav" → "Alice". */
export function fileStem(pathOrName: string): string {
  const name = pathOrName.split(/[\\/]/).pop() ?? "";
  const dot = name.lastIndexOf(".");
  const stem = (dot > 0 ? name.slice(0, dot) : name).trim();
  return stem === "" ? "voice" : stem;
}

/** The file name a clip is saved as: "cake-speech-2024-05-01_12-30-05.wav". */
export function clipFileName(clip: Pick<Clip, "id" | "created_at">): string {
  const stamp = /^(\d{4}-\d{2}-\d{2})T(\d{2}):(\d{2}):(\d{2})/.exec(clip.created_at);
  const label = stamp ? `${stamp[1]}_${stamp[2]}-${stamp[3]}-${stamp[4]}` : clip.id.replace(/[^A-Za-z0-9_-]/g, "");
  return `cake-speech-${label || "clip"}.wav`;
}

/** The start of a script on one line, for lists. */
export function scriptExcerpt(script: string, length = 90): string {
  const flat = script.replace(/\s+/g, " ").trim();
  return flat.length <= length ? flat : `${flat.slice(0, length - 1).trimEnd()}…`;
}

const END_LABELS: Record<ClipEnd, string> = {
  end_of_text: "complete",
  length: "cut at the length limit",
  stopped: "stopped",
};

/** Why a clip ended, in words. */
export function clipEndText(end: ClipEnd): string {
  return END_LABELS[end] ?? end;
}

/** Audio length: 0.5 → "0.5 s", 4.2 → "0:04", 75.6 → "1:16" (under a second would round to "0:00"); null → "—". */
export function formatAudioDuration(seconds: number | null): string {
  if (seconds === null || !Number.isFinite(seconds) || seconds < 0) return "—";
  if (seconds < 1) return `${seconds.toFixed(1)} s`;
  const total = Math.round(seconds);
  return `${Math.floor(total / 60)}:${String(total % 60).padStart(2, "0")}`;
}

/** A playing clock, whole seconds passed: 2.9 → "0:02", 75.2 → "1:15". */
export function formatClock(seconds: number): string {
  const total = Number.isFinite(seconds) && seconds > 0 ? Math.floor(seconds) : 0;
  return `${Math.floor(total / 60)}:${String(total % 60).padStart(2, "0")}`;
}

/** A voice as a choice: "Alice (0:05)", or just the name of a preset. */
export function voiceLabel(voice: Pick<Voice, "name" | "duration_s">): string {
  return voice.duration_s === null ? voice.name : `${voice.name} (${formatAudioDuration(voice.duration_s)})`;
}

// ---- Replies read aloud ------------------------------------------------------

/**
 * A chat reply's Markdown as words to speak: code blocks left out (they
 * read badly), links and images by their text, and the marks of headings,
 * lists, quotes, emphasis, tables and HTML taken off.
 */
export function speakableText(markdown: string): string {
  return markdown
    .replace(/```[\s\S]*?(```|$)/g, "\n")
    .replace(/<[^>\n]+>/g, "")
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, "$1")
    .split("\n")
    .filter((line) => !/^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$/.test(line)) // a table's rule
    .map((line) =>
      line
        .replace(/^\s{0,3}(#{1,6}|>+|[-*+]|\d+[.)])\s+/, "")
        .replace(/^\s*\|(.*)\|\s*$/, "$1")
        .replace(/\s*\|\s*/g, ", ")
        .replace(/(\*\*|__|~~|`)/g, "")
        .replace(/(^|[^\w*])\*(?=\S)|(?<=\S)\*(?=[^\w*]|$)/g, "$1")
        .replace(/(^|\W)_(?=\S)|(?<=\S)_(?=\W|$)/g, "$1")
        .trim(),
    )
    .join("\n")
    .replace(/\n{3,}/g, "\n\n")
    .trim();
}
