// Hooks for a voice's or clip's audio: its waveform peaks (fetched once per
// item) and a play/pause toggle that reports failures as toasts.

import { useEffect, useState } from "preact/hooks";
import type { Peak } from "../lib/waveform";
import { isAbortError } from "../transport";
import type { AudioKind } from "../state/speech";
import { useCake } from "./context";
import { player, usePlayback } from "./playback";

export interface PeaksResult {
  peaks: Peak[] | null;
  /** Why the waveform could not be drawn. */
  error: string | null;
}

export function usePeaks(kind: AudioKind, id: string, bins: number): PeaksResult {
  const cake = useCake();
  const [result, setResult] = useState<PeaksResult>({ peaks: null, error: null });
  useEffect(() => {
    let live = true;
    setResult({ peaks: null, error: null });
    cake.speech.peaks(kind, id, bins).then(
      (peaks) => live && setResult({ peaks, error: null }),
      (error: unknown) =>
        live && setResult({ peaks: null, error: error instanceof Error ? error.message : String(error) }),
    );
    return () => {
      live = false;
    };
  }, [cake, kind, id, bins]);
  return result;
}

export interface AudioControl {
  playing: boolean;
  loading: boolean;
  /** 0 … 1 of the way through while this item is the current audio, else 0. */
  progress: number;
  toggle: () => void;
}

export function useAudioControl(kind: AudioKind, id: string): AudioControl {
  const cake = useCake();
  const playback = usePlayback();
  const key = `${kind}:${id}`;
  const current = playback.key === key;
  return {
    playing: current && playback.playing,
    loading: current && playback.loading,
    progress: current && playback.duration > 0 ? playback.position / playback.duration : 0,
    toggle: () => {
      player
        .toggle(key, () => cake.speech.audio(kind, id))
        .catch((error: unknown) => {
          if (isAbortError(error)) return; // a play() cut short by a pause
          const reason = error instanceof Error ? error.message : String(error);
          cake.notices.report(new Error(`Cannot play this audio: ${reason}`));
        });
    },
  };
}
