// A waveform drawn on a canvas from min/max peaks: one bar per bin (bins
// are merged when the canvas is narrower), scaled to the loudest bin, in
// the theme's muted colour with the played part in the accent colour. It
// redraws when resized or when the theme changes.

import { useEffect, useRef, useState } from "preact/hooks";
import { mergePeaks, peakLevel, type Peak } from "../lib/waveform";
import { useTheme } from "./useTheme";

interface Props {
  peaks: Peak[] | null;
  /** 0 … 1: the part drawn as played. */
  progress?: number;
  label: string;
  testid: string;
  class?: string;
  /** Why there is no waveform (shown as the tooltip). */
  error?: string | null;
}

const GAP = 1; // px between bars

export function Waveform({ peaks, progress = 0, label, testid, class: extra, error }: Props) {
  const canvas = useRef<HTMLCanvasElement>(null);
  const width = useWidth(canvas);
  const scheme = useTheme();

  useEffect(() => {
    const element = canvas.current;
    if (element) draw(element, peaks ?? [], progress);
  }, [peaks, progress, width, scheme]);

  return (
    <canvas
      ref={canvas}
      class={`waveform${extra ? ` ${extra}` : ""}${peaks === null ? " empty" : ""}`}
      data-testid={testid}
      data-bins={peaks?.length ?? 0}
      role="img"
      aria-label={error ? `${label}: ${error}` : label}
      title={error ?? undefined}
    />
  );
}

function draw(element: HTMLCanvasElement, peaks: Peak[], progress: number): void {
  const context = element.getContext("2d");
  if (!context) return;
  const ratio = window.devicePixelRatio || 1;
  const width = element.clientWidth;
  const height = element.clientHeight;
  element.width = Math.max(1, Math.round(width * ratio));
  element.height = Math.max(1, Math.round(height * ratio));
  context.setTransform(ratio, 0, 0, ratio, 0, 0);
  context.clearRect(0, 0, width, height);

  const style = getComputedStyle(element);
  const rest = style.color;
  const played = style.getPropertyValue("--accent").trim() || rest;
  const middle = height / 2;
  if (peaks.length === 0) {
    context.fillStyle = rest;
    context.fillRect(0, middle - 0.5, width, 1);
    return;
  }

  const bars = mergePeaks(peaks, Math.max(1, Math.floor(width / 2)));
  const level = peakLevel(bars);
  const scale = level > 0 ? (middle - 1) / level : 0;
  const step = width / bars.length;
  const barWidth = Math.max(1, step - GAP);
  bars.forEach(({ min, max }, i) => {
    const x = i * step;
    const top = middle - max * scale;
    const bottom = middle - min * scale;
    context.fillStyle = (i + 0.5) / bars.length <= progress ? played : rest;
    context.fillRect(x, Math.min(top, middle - 0.5), barWidth, Math.max(bottom - top, 1));
  });
}

/** The element's CSS width, following resizes. */
function useWidth(ref: { current: HTMLElement | null }): number {
  const [width, setWidth] = useState(0);
  useEffect(() => {
    const element = ref.current;
    if (!element || typeof ResizeObserver === "undefined") return;
    const observer = new ResizeObserver(() => setWidth(element.clientWidth));
    observer.observe(element);
    return () => observer.disconnect();
  }, [ref]);
  return width;
}
