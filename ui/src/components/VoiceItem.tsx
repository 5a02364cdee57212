// One stored voice: name and delete (with confirmation), and for a voice
// prompt its length, play, a small waveform and the words it says (which
// LuxTTS needs; editable here); a preset holds no audio, so it only says
// that it is one.

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
      {kind === "prompt" ? <VoiceTranscript voice={voice} /> : null}
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

/** What a voice prompt says: shown, and written or corrected in place. */
function VoiceTranscript({ voice }: { voice: Voice }) {
  const cake = useCake();
  const [draft, setDraft] = useState<string | null>(null);
  const [saving, setSaving] = useState(false);
  const transcript = voice.transcript ?? "";

  if (draft === null) {
    return (
      <div class="voice-transcript small">
        <span class={transcript ? "" : "muted"} data-testid="voice-transcript">
          {transcript ? `“${transcript}”` : "No transcript (LuxTTS needs one)"}
        </span>
        <button
          type="button"
          class="link-button"
          data-testid="voice-transcript-edit"
          aria-label={`${transcript ? "Edit" : "Add"} what ${voice.name} says`}
          onClick={() => setDraft(transcript)}
        >
          {transcript ? "Edit" : "Add"}
        </button>
      </div>
    );
  }

  const save = async () => {
    setSaving(true);
    const kept = await cake.speech.setTranscript(voice.id, draft);
    setSaving(false);
    if (kept) setDraft(null);
  };
  return (
    <form
      class="voice-transcript-form small"
      onSubmit={(event) => {
        event.preventDefault();
        void save();
      }}
    >
      <textarea
        data-testid="voice-transcript-input"
        aria-label={`What ${voice.name} says`}
        rows={2}
        maxLength={1000}
        placeholder="The exact words spoken in the recording"
        value={draft}
        disabled={saving}
        onInput={(event) => setDraft(event.currentTarget.value)}
        onKeyDown={(event) => {
          if (event.key === "Escape") setDraft(null);
          if (event.key === "Enter" && !event.shiftKey) {
            event.preventDefault();
            void save();
          }
        }}
      />
      <div class="voice-transcript-actions">
        <button type="submit" data-testid="voice-transcript-save" disabled={saving}>
          Save
        </button>
        <button type="button" class="ghost" disabled={saving} onClick={() => setDraft(null)}>
          Cancel
        </button>
      </div>
    </form>
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
