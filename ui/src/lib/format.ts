// Human-readable numbers for the UI: parameter counts, sizes, speeds, times.
import type { FinishReason, ModelEntry } from "../api/types";

/** 135_000_000 → "135M", 1_540_000_000 → "1.5B". */
export function formatParameters(count: number | null): string {
  if (count === null || !Number.isFinite(count) || count < 0) return "—";
  const units: [number, string][] = [
    [1e12, "T"],
    [1e9, "B"],
    [1e6, "M"],
    [1e3, "K"],
  ];
  for (const [size, suffix] of units) {
    if (count >= size) return `${compact(count / size)}${suffix}`;
  }
  return String(Math.round(count));
}

/** Decimal units, as model hubs use: 270_000_000 → "270 MB". */
export function formatBytes(bytes: number): string {
  if (!Number.isFinite(bytes) || bytes < 0) return "—";
  const units: [number, string][] = [
    [1e12, "TB"],
    [1e9, "GB"],
    [1e6, "MB"],
    [1e3, "KB"],
  ];
  for (const [size, suffix] of units) {
    if (bytes >= size) return `${compact(bytes / size)} ${suffix}`;
  }
  return `${Math.round(bytes)} B`;
}

export function formatSpeed(bytesPerSecond: number): string {
  return `${formatBytes(bytesPerSecond)}/s`;
}

/** 42 → "42 s", 192 → "3 min 12 s", 3900 → "1 h 5 min". */
export function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) return "—";
  const total = Math.round(seconds);
  if (total < 60) return `${total} s`;
  const minutes = Math.floor(total / 60);
  if (minutes < 60) return `${minutes} min ${total % 60} s`;
  return `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
}

/** Seconds with sensible precision: 0.0421 → "0.04 s", 1.5 → "1.50 s", 12.3 → "12.3 s". */
export function formatSeconds(seconds: number): string {
  if (!Number.isFinite(seconds)) return "—";
  return `${seconds < 10 ? seconds.toFixed(2) : seconds.toFixed(1)} s`;
}

export function formatTokensPerSecond(rate: number): string {
  if (!Number.isFinite(rate)) return "—";
  return `${rate < 100 ? rate.toFixed(1) : Math.round(rate)} tok/s`;
}

/** One decimal below 100, none above; no trailing ".0". */
function compact(value: number): string {
  const text = value < 100 ? value.toFixed(1) : value.toFixed(0);
  return text.endsWith(".0") ? text.slice(0, -2) : text;
}

/** What a reply's stats say about how it ended, unless it ended by itself. */
export function stopNote(reason: FinishReason): string | null {
  switch (reason) {
    case "max_tokens":
      return "stopped at the token limit";
    case "context_full":
      return "stopped: the conversation fills the model's context";
    case "cancelled":
      return "stopped by you";
    case "eos":
    case "stop_string":
      return null;
  }
}

/** A model in a picker: "SmolLM2 135M Instruct (default, loaded)", each fact once. */
export function modelOptionLabel(model: ModelEntry, loadedModelId: string | null): string {
  const notes = [model.source === "default" ? "default" : null, model.id === loadedModelId ? "loaded" : null];
  const said = notes.filter((note) => note !== null);
  return said.length === 0 ? model.name : `${model.name} (${said.join(", ")})`;
}
