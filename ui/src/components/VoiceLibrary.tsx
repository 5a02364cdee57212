// The stored voice prompts: adding files, and the list with playback,
// waveforms and delete.

import { useAppState } from "./context";
import { VoiceDrop } from "./VoiceDrop";
import { VoiceItem } from "./VoiceItem";

export function VoiceLibrary() {
  const state = useAppState();
  return (
    <section class="voice-library" aria-labelledby="voices-title">
      <h2 id="voices-title" class="section-title">
        Voices
      </h2>
      <VoiceDrop />
      {!state.voicesReady ? (
        <p class="muted">Loading the voices…</p>
      ) : state.voices.length === 0 ? (
        <p class="muted small">No voices yet.</p>
      ) : null}
      <ul class="voice-list" data-testid="voice-list">
        {state.voices.map((voice) => (
          <VoiceItem key={voice.id} voice={voice} />
        ))}
      </ul>
    </section>
  );
}
