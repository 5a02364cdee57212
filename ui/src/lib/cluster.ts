// Pure helpers for the Cluster screen: the layer bar's segments and their
// colours, the settings form (its values and the changed-fields diff), and
// the texts derived from a cluster status.

import type {
  ClusterRun,
  ClusterSettings,
  ClusterSettingsUpdate,
  ClusterStatus,
  GpuMode,
  MachineState,
  PredictionLimit,
  WorkerService,
} from "../api/types";

// ---- Layer bar ---------------------------------------------------------------

/**
 * Colours for the machines of a run, mid-tone so that white labels read on
 * them and they stand out on both the light and the dark background.
 */
export const NODE_PALETTE: readonly string[] = [
  "#5b45c9", // violet
  "#1d7a63", // teal
  "#b0561a", // orange
  "#2a68b5", // blue
  "#ad3168", // pink
  "#4f7a16", // green
  "#7c4aa6", // purple
  "#a33a2a", // brick
  "#237e94", // cyan
  "#76671a", // olive
];

/** FNV-1a over the UTF-16 code units: a small, stable hash of a name. */
function hashName(name: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < name.length; i++) {
    hash ^= name.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash;
}

/** The palette colour a node name prefers; the same name always gets the same one. */
export function nodeColour(node: string): string {
  return NODE_PALETTE[hashName(node) % NODE_PALETTE.length];
}

/**
 * A colour per node: each name gets its preferred colour unless another node
 * of the set already has it, then the next free one. Names are placed in
 * sorted order, so the result depends only on the set of names (not on the
 * pipeline order) and stays the same from one status to the next. Beyond
 * the palette's size colours repeat.
 */
export function nodeColours(nodes: readonly string[]): Map<string, string> {
  const names = [...new Set(nodes)].sort();
  const taken = new Set<number>();
  const colours = new Map<string, string>();
  for (const name of names) {
    const preferred = hashName(name) % NODE_PALETTE.length;
    let index = preferred;
    if (taken.size < NODE_PALETTE.length) {
      while (taken.has(index)) index = (index + 1) % NODE_PALETTE.length;
    }
    taken.add(index);
    colours.set(name, NODE_PALETTE[index]);
  }
  return colours;
}

/** One coloured part of the layer bar: the layers one stage runs. */
export interface LayerSegment {
  /** Index of the stage in `run.stages`. */
  stage: number;
  node: string;
  /** First layer (inclusive). */
  start: number;
  /** Layer after the last (exclusive), as in the API. */
  end: number;
  /** Share of the bar, 0..100; the segments' widths add up to 100. */
  percent: number;
  colour: string;
  /** "layers 0–11" (the last layer inclusive) or "layer 7". */
  label: string;
}

/** The number of layers in a [start, end) range (0 when empty or reversed). */
export function layerCount([start, end]: readonly [number, number]): number {
  return Math.max(0, end - start);
}

/** The layers of a [start, end) range, last one inclusive: "0–11", "7", or "none". */
export function layerRange(layers: readonly [number, number]): string {
  const count = layerCount(layers);
  if (count === 0) return "none";
  const [start, end] = layers;
  return count === 1 ? String(start) : `${start}–${end - 1}`;
}

/** "layers 0–11" for [0, 12), "layer 7" for [7, 8), "no layers" when empty. */
export function layerLabel(layers: readonly [number, number]): string {
  const count = layerCount(layers);
  if (count === 0) return "no layers";
  return `${count === 1 ? "layer" : "layers"} ${layerRange(layers)}`;
}

/**
 * The layer bar of a run: one segment per stage that has layers, in
 * pipeline order, as wide as its share of the layers. The widths are
 * relative to the layers the stages hold (normally `run.total_layers`), so
 * they always add up to 100.
 */
export function layerSegments(run: ClusterRun): LayerSegment[] {
  const colours = stageColours(run);
  const held = run.stages.reduce((sum, stage) => sum + layerCount(stage.layers), 0);
  if (held === 0) return [];
  const segments: LayerSegment[] = [];
  run.stages.forEach((stage, index) => {
    const count = layerCount(stage.layers);
    if (count === 0) return;
    segments.push({
      stage: index,
      node: stage.node,
      start: stage.layers[0],
      end: stage.layers[1],
      percent: (count / held) * 100,
      colour: colours.get(stage.node) ?? nodeColour(stage.node),
      label: layerLabel(stage.layers),
    });
  });
  return segments;
}

/** The colour of each node of a run (the same map the layer bar uses). */
export function stageColours(run: ClusterRun): Map<string, string> {
  return nodeColours(run.stages.map((stage) => stage.node));
}

// ---- Settings form ---------------------------------------------------------------

/** The settings form's values, as typed (numbers stay text until saved). */
export interface ClusterForm {
  /** A new key; "" keeps the stored one. */
  key: string;
  join_as_worker: boolean;
  worker_name: string;
  worker_port: string;
  /** Comma-separated interface names. */
  mdns_interfaces: string;
  discovery_timeout_s: string;
  /** Worker addresses, one per line (or separated by commas or spaces). */
  worker_addresses: string;
  /** Tokens a conversation may hold; "" or "0" for the model's own. */
  context_length: string;
  gpu: GpuMode;
}

/** The shortest and longest context one may choose (as the app checks). */
export const MIN_CONTEXT_TOKENS = 64;
export const MAX_CONTEXT_TOKENS = 1 << 20;

/** The form as the settings stand (with an empty key field). */
export function formFromSettings(settings: ClusterSettings): ClusterForm {
  return {
    key: "",
    join_as_worker: settings.join_as_worker,
    worker_name: settings.worker_name,
    worker_port: String(settings.worker_port),
    mdns_interfaces: settings.mdns_interfaces.join(", "),
    discovery_timeout_s: String(settings.discovery_timeout_s),
    worker_addresses: settings.worker_addresses.join("\n"),
    context_length: settings.context_length > 0 ? String(settings.context_length) : "",
    gpu: settings.gpu,
  };
}

/** "eth0, wlan0" → ["eth0", "wlan0"]; blanks are dropped, so "" → [] (all interfaces). */
export function parseInterfaces(text: string): string[] {
  return text
    .split(",")
    .map((name) => name.trim())
    .filter((name) => name !== "");
}

/** Typed worker addresses as a list: split at line breaks, commas and
 *  spaces, blanks and repeats dropped. */
export function parseWorkerAddresses(text: string): string[] {
  const addresses = text.split(/[\s,]+/).filter((address) => address !== "");
  return addresses.filter((address, i) => addresses.indexOf(address) === i);
}

/** Whether `address` is `host:port` (a port from 1 to 65535), as the app accepts it. */
export function isWorkerAddress(address: string): boolean {
  const colon = address.lastIndexOf(":");
  const host = address.slice(0, colon).replace(/^\[|\]$/g, "");
  const port = address.slice(colon + 1);
  return colon > 0 && host !== "" && /^\d{1,5}$/.test(port) && Number(port) >= 1 && Number(port) <= 65535;
}

export const MAX_DISCOVERY_SECONDS = 60;

/** What saving the form would send: only the fields that differ from `settings`. */
export interface SettingsChanges {
  update: ClusterSettingsUpdate;
  /** Why the form cannot be saved as it is (a number out of range …), or null. */
  problem: string | null;
}

/** The `set_cluster_settings` update for a form: only the fields that changed. */
export function settingsChanges(settings: ClusterSettings, form: ClusterForm): SettingsChanges {
  const update: ClusterSettingsUpdate = {};
  const problems: string[] = [];

  // An empty key field means "keep the stored key"; forgetting is a separate action.
  const key = form.key.trim();
  if (key !== "") update.key = key;

  if (form.join_as_worker !== settings.join_as_worker) update.join_as_worker = form.join_as_worker;

  const name = form.worker_name.trim();
  if (name !== settings.worker_name) update.worker_name = name;

  const portText = form.worker_port.trim();
  const port = /^\d+$/.test(portText) ? Number(portText) : NaN;
  if (!(port >= 0 && port <= 65535)) problems.push("The port must be a whole number from 0 to 65535.");
  else if (port !== settings.worker_port) update.worker_port = port;

  const interfaces = parseInterfaces(form.mdns_interfaces);
  if (!sameList(interfaces, settings.mdns_interfaces)) update.mdns_interfaces = interfaces;

  const secondsText = form.discovery_timeout_s.trim();
  const seconds = secondsText === "" ? NaN : Number(secondsText);
  if (!(seconds >= 0 && seconds <= MAX_DISCOVERY_SECONDS)) {
    problems.push(`The discovery time must be a number of seconds from 0 to ${MAX_DISCOVERY_SECONDS}.`);
  } else if (seconds !== settings.discovery_timeout_s) {
    update.discovery_timeout_s = seconds;
  }

  const addresses = parseWorkerAddresses(form.worker_addresses);
  const badAddress = addresses.find((address) => !isWorkerAddress(address));
  if (badAddress !== undefined) {
    problems.push(`"${badAddress}" is not a worker address: write host:port, e.g. 192.168.1.20:10128.`);
  } else if (!sameList(addresses, settings.worker_addresses)) {
    update.worker_addresses = addresses;
  }

  const contextText = form.context_length.trim();
  const tokens = contextText === "" ? 0 : Number(contextText);
  if (!(tokens === 0 || (Number.isInteger(tokens) && tokens >= MIN_CONTEXT_TOKENS && tokens <= MAX_CONTEXT_TOKENS))) {
    problems.push(
      `The context length must be a whole number of tokens from ${MIN_CONTEXT_TOKENS} to ${MAX_CONTEXT_TOKENS}, or empty for the model's own.`,
    );
  } else if (tokens !== settings.context_length) {
    update.context_length = tokens;
  }

  if (form.gpu !== settings.gpu) update.gpu = form.gpu;

  return { update, problem: problems.length > 0 ? problems.join(" ") : null };
}

/** Whether an update changes anything. */
export function isEmptyUpdate(update: ClusterSettingsUpdate): boolean {
  return Object.keys(update).length === 0;
}

function sameList(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((item, i) => item === b[i]);
}

// ---- Texts ---------------------------------------------------------------------

/** "Key set · cluster ab12cd34 (stored in keyring)", or null without a key. */
export function keyDescription(settings: ClusterSettings): string | null {
  if (!settings.key_set) return null;
  const identity = settings.cluster_id ? ` · cluster ${settings.cluster_id}` : " · typed key";
  const where = settings.key_storage
    ? ` (stored in ${settings.key_storage})`
    : settings.from_command_line
      ? " (from the command line)"
      : "";
  return `Key set${identity}${where}`;
}

/** Where masters reach this worker: its network addresses (not the `0.0.0.0` it listens on). */
function servingText(worker: WorkerService): string {
  const reachable = worker.reachable_at ?? [worker.address];
  if (reachable.length === 0) {
    const port = worker.address.split(":").at(-1);
    return `serving on port ${port} (no network address found: is this machine on a network?)`;
  }
  return `serving at ${reachable.join(", ")}`;
}

/** The one-line summary of what this machine is in the cluster. */
export function roleText(status: ClusterStatus): string {
  switch (status.role) {
    case "master":
      return "Master: models you load use the workers below";
    case "worker":
      return status.worker ? `Worker: ${servingText(status.worker)}` : "Worker: not serving";
    default:
      return "Not in a cluster";
  }
}

export const MACHINE_STATE_LABELS: Record<MachineState, string> = {
  this_machine: "This machine",
  authenticated: "Authenticated",
  rejected: "Rejected",
  unreachable: "Unreachable",
  lost: "Lost",
};

/** 17_179_869_184 → "17.2 GB" (decimal, one decimal place). */
export function formatGigabytes(bytes: number): string {
  if (!Number.isFinite(bytes) || bytes < 0) return "—";
  return `${(bytes / 1e9).toFixed(1)} GB`;
}

/** A 0..1 share as a whole percentage: 0.456 → "46%". */
export function formatShare(share: number): string {
  if (!Number.isFinite(share)) return "—";
  return `${Math.round(Math.min(Math.max(share, 0), 1) * 100)}%`;
}

/** The planner's time per token: 0.0114 → "11 ms/token", 1.5 → "1.50 s/token". */
export function formatSecondsPerToken(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds <= 0) return "—";
  if (seconds < 1) return `${seconds < 0.01 ? (seconds * 1000).toFixed(1) : Math.round(seconds * 1000)} ms/token`;
  return `${seconds.toFixed(2)} s/token`;
}

/** The fraction of a transfer done, or null when there is nothing to transfer. */
export function transferFraction(done: number, total: number): number | null {
  return total > 0 ? Math.min(done / total, 1) : null;
}

/** What limits a predicted time, in words: "a's memory", "the links". */
export function limitText(limit: PredictionLimit): string {
  switch (limit.kind) {
    case "memory":
      return `${limit.machine}'s memory bandwidth`;
    case "compute":
      return `${limit.machine}'s compute`;
    case "link":
      return "the network";
  }
}

/** 191.94 → "192 tok/s", 8.04 → "8.0 tok/s". */
export function formatTokensPerSecond(rate: number): string {
  if (!Number.isFinite(rate) || rate <= 0) return "—";
  return `${rate >= 100 ? Math.round(rate) : rate.toFixed(1)} tok/s`;
}

/** 0.661 → "0.66 s", 0.0123 → "12 ms". */
export function formatSeconds(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) return "—";
  return seconds < 0.1 ? `${Math.round(seconds * 1000)} ms` : `${seconds.toFixed(2)} s`;
}
