// The clip made last: play/pause, its waveform (the played part coloured),
// Save as a WAV file, and how it was made.

import type { Clip } from "../api/types";
import { clipEndText, formatAudioDuration } from "../lib/speech";
import { useCake } from "./context";
import { SaveIcon } from "./icons";
import { PlayButton } from "./PlayButton";
import { useAudioControl, usePeaks } from "./useAudio";
import { useSaveClip } from "./useSaveClip";
import { Waveform } from "./Waveform";

/** Bins of the result's waveform (merged further on narrow screens). */
const RESULT_BINS = 400;

export function ClipResult({ clip }: { clip: Clip }) {
  const cake = useCake();
  const control = useAudioControl("clip", clip.id);
  const { peaks, error } = usePeaks("clip", clip.id, RESULT_BINS);
  const save = useSaveClip();

  return (
    <section class="clip-result" data-testid="clip-result" data-clip-id={clip.id} aria-labelledby="clip-result-title">
      <div class="clip-result-head">
        <h2 id="clip-result-title" class="section-title">
          Result
        </h2>
        <span class="muted small">
          {formatAudioDuration(clip.duration_s)} · {clipEndText(clip.end)}
        </span>
      </div>
      <div class="clip-player">
        <PlayButton
          playing={control.playing}
          loading={control.loading}
          onClick={control.toggle}
          label="the result"
          testid="clip-play"
          text={true}
        />
        <Waveform
          peaks={peaks}
          error={error}
          progress={control.progress}
          label="Waveform of the result"
          testid="clip-waveform"
          class="clip-waveform"
        />
        <button type="button" data-testid="clip-save" onClick={() => void save(clip)}>
          <SaveIcon /> Save
        </button>
      </div>
      <div class="clip-facts muted small">
        <span>seed {clip.seed}</span>
        <span>CFG {clip.cfg_scale}</span>
        <span>{clip.steps} steps</span>
        <span>{clip.frames} frames</span>
        <button
          type="button"
          class="link-button small"
          data-testid="clip-reuse-seed"
          onClick={() => cake.speech.edit({ seed: String(clip.seed) })}
        >
          Use this seed
        </button>
      </div>
    </section>
  );
}
