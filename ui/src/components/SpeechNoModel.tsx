// Shown on the Speech screen while the library has no complete speech
// model: the three families, what to get and how to import it, and any
// speech model that is there but incomplete, with its problem (and, for a
// VibeVoice folder, the one click that downloads its tokenizer).

import type { ModelEntry } from "../api/types";
import { modelKind } from "../state/app-state";
import { useAppState, useCake } from "./context";
import { DownloadProgress } from "./DownloadProgress";

/** A VibeVoice folder that is not complete: most often only its text tokenizer is missing. */
function needsTokenizer(model: ModelEntry): boolean {
  return model.status === "incomplete" && model.voice !== "transcribed_prompt";
}

export function SpeechNoModel() {
  const state = useAppState();
  const cake = useCake();
  const unusable = state.models.filter((model) => modelKind(model) === "speech" && model.status !== "complete");
  return (
    <section class="speech-empty" data-testid="speech-no-model" aria-labelledby="speech-empty-title">
      <h2 id="speech-empty-title">No speech model yet</h2>
      <p>Speech runs one of three model families; download one on the Models screen, or import its folder there:</p>
      <ul class="speech-families" data-testid="speech-families">
        <li>
          <strong>VibeVoice 1.5B</strong> (<code>microsoft/VibeVoice-1.5B</code>): voices from WAV recordings, up to
          four speakers in one script.
        </li>
        <li>
          <strong>VibeVoice Realtime 0.5B</strong> (<code>microsoft/VibeVoice-Realtime-0.5B</code>): one voice preset,
          heard while it is made.
        </li>
        <li>
          <strong>LuxTTS</strong>: a voice from a short WAV recording and the words it says, at 48 kHz.
        </li>
      </ul>
      <p class="muted small">
        VibeVoice folders come without a text tokenizer. A download fetches it; for an imported folder Cake uses any
        Qwen2.5 model already in the Hugging Face cache, or else copy Qwen2.5's <code>tokenizer.json</code> into the
        folder.
      </p>
      {unusable.map((model) => (
        <div key={model.id} class="model-problem" data-testid="speech-unusable-model">
          <p>
            {model.name}: {model.problem ?? "incomplete"}
          </p>
          {needsTokenizer(model) ? (
            <button
              type="button"
              class="small"
              data-testid="speech-fetch-tokenizer"
              disabled={state.download !== null}
              onClick={() => void cake.models.fetchSpeechTokenizer(model)}
            >
              Download its tokenizer (a few MB)
            </button>
          ) : null}
        </div>
      ))}
      {state.download ? <DownloadProgress download={state.download} /> : null}
      <div>
        <button type="button" class="primary" data-testid="speech-open-models" onClick={() => cake.showView("models")}>
          Open Models
        </button>
      </div>
    </section>
  );
}
