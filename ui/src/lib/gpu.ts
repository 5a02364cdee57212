// Texts about this machine's GPU: where a loaded model's layers run, and
// what each GPU setting would find.

import type { GpuFound, GpuMode, GpuPlacement } from "../api/types";
import { formatBytes } from "./format";

/** "0–11, 14" for layers 0 to 11 and 14. */
export function layerRanges(layers: readonly number[]): string {
  const parts: string[] = [];
  let i = 0;
  while (i < layers.length) {
    let j = i;
    while (j + 1 < layers.length && layers[j + 1] === layers[j] + 1) j++;
    parts.push(i === j ? String(layers[i]) : `${layers[i]}–${layers[j]}`);
    i = j + 1;
  }
  return parts.join(", ");
}

/** One line for the Models screen: which layers the GPU holds, or why none. */
export function describePlacement(placement: GpuPlacement | null): string | null {
  if (placement === null) return null;
  if (placement.device === null) {
    return placement.cpu_reasons.length > 0 ? `CPU only: ${placement.cpu_reasons.join("; ")}` : null;
  }
  if (placement.layers.length === 0) return `CPU only: ${placement.cpu_reasons.join("; ") || "no layer fits the GPU"}`;
  // The layers first: a narrow header cuts the device's long name instead.
  const layers = placement.layers.length === 1 ? "Layer" : "Layers";
  return `${layers} ${layerRanges(placement.layers)} on the GPU: ${placement.device}`;
}

/** What choosing `mode` would use on this machine. */
export function describeGpuChoice(mode: GpuMode, found: { auto: GpuFound; on: GpuFound }): string {
  if (mode === "off") return "Models run on the CPU.";
  const choice = found[mode];
  if (choice.device !== null) return `Uses ${choice.device}.`;
  return `No GPU to use (${choice.unavailable ?? "none found"}): models run on the CPU.`;
}

/** A plan stage's GPU share: "layers 1–5 on its GPU (1.2 GB)", or null when its GPU runs none. */
export function describeStageGpu(stage: { gpu_layers?: number[]; gpu_memory_bytes?: number }): string | null {
  const layers = stage.gpu_layers ?? [];
  if (layers.length === 0) return null;
  const noun = layers.length === 1 ? "layer" : "layers";
  return `${noun} ${layerRanges(layers)} on its GPU (${formatBytes(stage.gpu_memory_bytes ?? 0)})`;
}
