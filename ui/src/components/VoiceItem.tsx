// One stored voice prompt: name, length, a small waveform, play and delete
// (with confirmation).

import { useState } from "preact/hooks";
import type { Voice } from "../api/types";
import { formatAudioDuration } from "../lib/speech";
import { ConfirmDialog } from "./ConfirmDialog";
import { useCake } from "./context";
import { TrashIcon } from "./icons";
import { PlayButton } from "./PlayButton";
import { player } from "./playback";
import { useAudioControl, usePeaks } from "./useAudio";
import { Waveform } from "./Waveform";

const VOICE_BINS = 120;

export function VoiceItem({ voice }: { voice: Voice }) {
  const cake = useCake();
  const control = useAudioControl("voice", voice.id);
  const { peaks, error } = usePeaks("voice", voice.id, VOICE_BINS);
  const [confirming, setConfirming] = useState(false);

  return (
    <li class="voice-item" data-testid="voice-item" data-voice-id={voice.id}>
      <div class="voice-item-head">
        <PlayButton
          playing={control.playing}
          loading={control.loading}
          onClick={control.toggle}
          label={`voice ${voice.name}`}
          testid="voice-play"
        />
        <span class="voice-name" data-testid="voice-name" title={voice.name}>
          {voice.name}
        </span>
        <span class="muted small voice-duration" data-testid="voice-duration">
          {formatAudioDuration(voice.duration_s)}
        </span>
        <button
          type="button"
          class="icon-button"
          data-testid="voice-delete"
          aria-label={`Delete voice ${voice.name}`}
          title="Delete voice"
          onClick={() => setConfirming(true)}
        >
          <TrashIcon />
        </button>
      </div>
      <Waveform
        peaks={peaks}
        error={error}
        progress={control.progress}
        label={`Waveform of ${voice.name}`}
        testid="voice-waveform"
        class="voice-waveform"
      />
      {voice.notice ? <span class="voice-notice small">{voice.notice}</span> : null}
      {confirming ? (
        <ConfirmDialog
          title={`Delete the voice ${voice.name}?`}
          message={`The voice prompt “${voice.name}” will be deleted for good. Clips made with it stay.`}
          confirmLabel="Delete"
          onCancel={() => setConfirming(false)}
          onConfirm={() => {
            setConfirming(false);
            player.stopIf(`voice:${voice.id}`);
            void cake.speech.deleteVoice(voice.id);
          }}
        />
      ) : null}
    </li>
  );
}
