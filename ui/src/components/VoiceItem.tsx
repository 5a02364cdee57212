// One stored voice: name and delete (with confirmation), and for a voice
// prompt its length, play and a small waveform; a preset holds no audio,
// so it only says that it is one.

import { useState } from "preact/hooks";
import type { Voice } from "../api/types";
import { formatAudioDuration, voiceKind } from "../lib/speech";
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
  const kind = voiceKind(voice);
  const control = useAudioControl("voice", voice.id);
  const [confirming, setConfirming] = useState(false);

  return (
    <li class="voice-item" data-testid="voice-item" data-voice-id={voice.id} data-voice-kind={kind}>
      <div class="voice-item-head">
        {kind === "prompt" ? (
          <PlayButton
            playing={control.playing}
            loading={control.loading}
            onClick={control.toggle}
            label={`voice ${voice.name}`}
            testid="voice-play"
          />
        ) : null}
        <span class="voice-name" data-testid="voice-name" title={voice.name}>
          {voice.name}
        </span>
        {kind === "prompt" ? (
          <span class="muted small voice-duration" data-testid="voice-duration">
            {formatAudioDuration(voice.duration_s)}
          </span>
        ) : (
          <span class="badge kind-badge" data-testid="voice-preset-badge" title="A VibeVoice-Realtime voice preset">
            preset
          </span>
        )}
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
      {kind === "prompt" ? <VoiceWaveform voice={voice} progress={control.progress} /> : null}
      {voice.notice ? <span class="voice-notice small">{voice.notice}</span> : null}
      {confirming ? (
        <ConfirmDialog
          title={`Delete the voice ${voice.name}?`}
          message={`The voice ${kind} “${voice.name}” will be deleted for good. Clips made with it stay.`}
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

/** A voice prompt's samples, the played part coloured. */
function VoiceWaveform({ voice, progress }: { voice: Voice; progress: number }) {
  const { peaks, error } = usePeaks("voice", voice.id, VOICE_BINS);
  return (
    <Waveform
      peaks={peaks}
      error={error}
      progress={progress}
      label={`Waveform of ${voice.name}`}
      testid="voice-waveform"
      class="voice-waveform"
    />
  );
}
