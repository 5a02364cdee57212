// One voice picker per speaker of the script, in order of the speakers'
// numbers (`voice_ids[k]` of `speak`).

import { MAX_SPEAKERS, formatAudioDuration, scriptSpeakers } from "../lib/speech";
import { useAppState, useCake } from "./context";

export function VoiceSlots() {
  const state = useAppState();
  const cake = useCake();
  const { numbers } = scriptSpeakers(state.speechForm.script);
  const slots = numbers.slice(0, MAX_SPEAKERS);
  const known = new Set(state.voices.map((voice) => voice.id));

  return (
    <div class="voice-slots" data-testid="speech-voices">
      <span class="field-label">Voices</span>
      {slots.length === 0 ? (
        <p class="muted small slot-hint">Each speaker of the script gets a voice here.</p>
      ) : (
        <div class="voice-slot-grid">
          {slots.map((number, slot) => {
            const chosen = state.speechForm.voiceIds[slot] ?? "";
            return (
              <label
                key={slot}
                class={`voice-slot${known.has(chosen) ? "" : " unset"}`}
                data-testid="speech-voice-slot"
                data-speaker={slot}
                data-speaker-number={number}
              >
                <span class="voice-slot-name">Speaker {number}</span>
                <select
                  data-testid="speech-voice-select"
                  value={known.has(chosen) ? chosen : ""}
                  disabled={state.speaking !== null}
                  onChange={(event) => cake.speech.chooseVoice(slot, event.currentTarget.value)}
                >
                  <option value="">{state.voices.length === 0 ? "No voices yet" : "Choose a voice…"}</option>
                  {state.voices.map((voice) => (
                    <option key={voice.id} value={voice.id}>
                      {voice.name} ({formatAudioDuration(voice.duration_s)})
                    </option>
                  ))}
                </select>
              </label>
            );
          })}
        </div>
      )}
      {slots.length > 0 && state.voicesReady && state.voices.length === 0 ? (
        <p class="muted small slot-hint">Add a voice first: drop a WAV recording of someone speaking into Voices.</p>
      ) : null}
    </div>
  );
}
