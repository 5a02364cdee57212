// The voices the script is spoken in, as the chosen model needs them: a
// voice prompt per speaker of the script, in order of the speakers' numbers
// (`voice_ids[k]` of `speak`), one voice preset, or (LuxTTS) one voice
// prompt whose words are known. Each picker lists only the voices of the
// kind the model takes.

import type { VoiceKind } from "../api/types";
import { MAX_SPEAKERS, MODEL_NEEDS, scriptSpeakers, voiceLabel, voicesOfKind } from "../lib/speech";
import { speechModelId, speechVoiceKind } from "../state/app-state";
import { useAppState, useCake } from "./context";

export function VoiceSlots() {
  const state = useAppState();
  const kind = speechVoiceKind(state);
  return (
    <div class="voice-slots" data-testid="speech-voices" data-voice-kind={kind}>
      <span class="field-label">{{ prompt: "Voices", preset: "Voice preset", transcribed_prompt: "Voice" }[kind]}</span>
      {speechModelId(state) !== null ? (
        <p class="muted small slot-hint" data-testid="speech-model-needs">
          {MODEL_NEEDS[kind]}
        </p>
      ) : null}
      {{ prompt: <PromptSlots />, preset: <PresetSlot />, transcribed_prompt: <TranscribedSlot /> }[kind]}
    </div>
  );
}

/** One picker per speaker of the script. */
function PromptSlots() {
  const state = useAppState();
  const slots = scriptSpeakers(state.speechForm.script).numbers.slice(0, MAX_SPEAKERS);
  if (slots.length === 0) return <p class="muted small slot-hint">Each speaker of the script gets a voice here.</p>;
  const none = state.voicesReady && voicesOfKind(state.voices, "prompt").length === 0;
  return (
    <>
      <div class="voice-slot-grid">
        {slots.map((number, slot) => (
          <VoiceSlot key={slot} kind="prompt" slot={slot} title={`Speaker ${number}`} speakerNumber={number} />
        ))}
      </div>
      {none ? (
        <p class="muted small slot-hint">Add a voice first: drop a WAV recording of someone speaking into Voices.</p>
      ) : null}
    </>
  );
}

/** The one preset a VibeVoice-Realtime model speaks in, and where presets come from. */
function PresetSlot() {
  const state = useAppState();
  const none = state.voicesReady && voicesOfKind(state.voices, "preset").length === 0;
  return (
    <>
      <div class="voice-slot-grid">
        <VoiceSlot kind="preset" slot={0} title="Voice preset" />
      </div>
      {none ? (
        <p class="muted small slot-hint" data-testid="speech-preset-hint">
          VibeVoice-Realtime speaks in a voice preset. Add one to Voices: one of Microsoft's demo presets (
          <code>demo/voices/streaming_model/*.pt</code> in <code>github.com/microsoft/VibeVoice</code>) or a{" "}
          <code>.safetensors</code> preset. A preset cannot be made from a WAV recording: Microsoft has not released how
          presets are made.
        </p>
      ) : null}
    </>
  );
}

/** LuxTTS's one voice: a prompt, and whether its words are known. */
function TranscribedSlot() {
  const state = useAppState();
  const prompts = voicesOfKind(state.voices, "prompt");
  const chosen = prompts.find((voice) => voice.id === (state.speechForm.voiceIds[0] ?? ""));
  let hint: string | null = null;
  if (state.voicesReady && prompts.length === 0) {
    hint = "Add a voice first: drop a WAV recording of someone speaking into Voices, then write what it says.";
  } else if (chosen !== undefined && !chosen.transcript) {
    hint = `LuxTTS reads what the voice says beside its audio: write the words of “${chosen.name}” under it in Voices.`;
  }
  return (
    <>
      <div class="voice-slot-grid">
        <VoiceSlot kind="prompt" slot={0} title="Voice" />
      </div>
      {chosen?.transcript ? (
        <p class="muted small slot-hint" data-testid="speech-transcript-shown">
          Says: “{chosen.transcript}”
        </p>
      ) : null}
      {hint !== null ? (
        <p class="muted small slot-hint" data-testid="speech-transcript-hint">
          {hint}
        </p>
      ) : null}
    </>
  );
}

const CHOICE_TEXTS: Record<VoiceKind, { none: string; choose: string }> = {
  prompt: { none: "No voices yet", choose: "Choose a voice…" },
  preset: { none: "No voice presets yet", choose: "Choose a preset…" },
};

interface SlotProps {
  kind: VoiceKind;
  /** Index into the form's `voiceIds`. */
  slot: number;
  title: string;
  /** The speaker's number as written in the script (prompt slots). */
  speakerNumber?: number;
}

/** A picker of the voices of one kind; a chosen voice of the other kind shows as none. */
function VoiceSlot({ kind, slot, title, speakerNumber }: SlotProps) {
  const state = useAppState();
  const cake = useCake();
  const voices = voicesOfKind(state.voices, kind);
  const chosen = state.speechForm.voiceIds[slot] ?? "";
  const known = voices.some((voice) => voice.id === chosen);
  const texts = CHOICE_TEXTS[kind];
  return (
    <label
      class={`voice-slot${known ? "" : " unset"}`}
      data-testid="speech-voice-slot"
      data-speaker={slot}
      data-speaker-number={speakerNumber}
    >
      <span class="voice-slot-name">{title}</span>
      <select
        data-testid="speech-voice-select"
        value={known ? chosen : ""}
        disabled={state.speaking !== null}
        onChange={(event) => cake.speech.chooseVoice(slot, event.currentTarget.value)}
      >
        <option value="">{voices.length === 0 ? texts.none : texts.choose}</option>
        {voices.map((voice) => (
          <option key={voice.id} value={voice.id}>
            {voiceLabel(voice)}
          </option>
        ))}
      </select>
    </label>
  );
}
