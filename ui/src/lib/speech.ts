// Pure helpers for the Speech screen: reading a script's speakers the way
// the backend does, checking the form before `speak`, and small texts.

import type { Clip, ClipEnd, SpeakRequest, Voice } from "../api/types";

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

/** The generation settings as typed (text fields; empty = the default / none). */
export interface SpeechSettingsForm {
  cfgScale: string;
  steps: string;
  /** Empty: a random seed. */
  seed: string;
  /** Empty: no limit beyond the model's own. */
  maxSeconds: string;
}

export const DEFAULT_CFG_SCALE = 1.3;
export const DEFAULT_STEPS = 10;

export const DEFAULT_SPEECH_SETTINGS: SpeechSettingsForm = {
  cfgScale: String(DEFAULT_CFG_SCALE),
  steps: String(DEFAULT_STEPS),
  seed: "",
  maxSeconds: "",
};

type Settings = Pick<SpeakRequest, "cfg_scale" | "steps" | "seed" | "max_seconds">;

function numberOf(text: string): number | null {
  const trimmed = text.trim();
  if (trimmed === "") return null;
  const value = Number(trimmed);
  return Number.isFinite(value) ? value : NaN;
}

/** The settings to send, or the first problem with what was typed. */
export function speakSettings(form: SpeechSettingsForm): { settings: Settings; problem: string | null } {
  const settings: Settings = {};
  const cfg = numberOf(form.cfgScale);
  if (cfg === null) settings.cfg_scale = DEFAULT_CFG_SCALE;
  else if (cfg > 0) settings.cfg_scale = cfg;
  else return { settings, problem: "CFG scale must be a number above 0." };

  const steps = numberOf(form.steps);
  if (steps === null) settings.steps = DEFAULT_STEPS;
  else if (Number.isInteger(steps) && steps >= 1) settings.steps = steps;
  else return { settings, problem: "Steps must be a whole number of at least 1." };

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
  script: string;
  /** The voice chosen for each speaker slot ("" = none yet). */
  voiceIds: readonly string[];
  /** The voices that exist: a chosen voice that was deleted counts as none. */
  voices: readonly Voice[];
  settings: SpeechSettingsForm;
}

/** The `speak` request for the form, or why it cannot be sent yet. */
export function planSpeech(input: SpeechPlanInput): { request: SpeakRequest | null; problem: string | null } {
  const refuse = (problem: string) => ({ request: null, problem });
  if (input.modelId === null) return refuse("Choose a speech model.");
  if (input.script.trim() === "") return refuse("Write a script to speak.");
  const speakers = scriptSpeakers(input.script);
  if (speakers.count > MAX_SPEAKERS) {
    return refuse(`The script has ${speakers.count} speakers; at most ${MAX_SPEAKERS} are supported.`);
  }
  const known = new Set(input.voices.map((voice) => voice.id));
  const voiceIds: string[] = [];
  for (let slot = 0; slot < speakers.count; slot++) {
    const id = input.voiceIds[slot] ?? "";
    if (!known.has(id)) return refuse(`Choose a voice for Speaker ${speakers.numbers[slot]}.`);
    voiceIds.push(id);
  }
  const { settings, problem } = speakSettings(input.settings);
  if (problem !== null) return refuse(problem);
  return {
    request: { model_id: input.modelId, script: input.script, voice_ids: voiceIds, ...settings },
    problem: null,
  };
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

/** Audio length: 0.5 → "0.5 s", 4.2 → "0:04", 75.6 → "1:16" (under a second would round to "0:00"). */
export function formatAudioDuration(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) return "—";
  if (seconds < 1) return `${seconds.toFixed(1)} s`;
  const total = Math.round(seconds);
  return `${Math.floor(total / 60)}:${String(total % 60).padStart(2, "0")}`;
}
