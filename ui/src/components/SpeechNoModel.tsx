// Shown on the Speech screen while the library has no complete speech
// model: what to get and how to import it, and any speech model that is
// there but incomplete, with its problem.

import { modelKind } from "../state/app-state";
import { useAppState, useCake } from "./context";

export function SpeechNoModel() {
  const state = useAppState();
  const cake = useCake();
  const unusable = state.models.filter((model) => modelKind(model) === "speech" && model.status !== "complete");
  return (
    <section class="speech-empty" data-testid="speech-no-model" aria-labelledby="speech-empty-title">
      <h2 id="speech-empty-title">No speech model yet</h2>
      <p>
        Speech uses a <strong>VibeVoice</strong> model folder: <code>microsoft/VibeVoice-1.5B</code> (voices from WAV
        recordings, up to four speakers) or <code>microsoft/VibeVoice-Realtime-0.5B</code> (one voice preset). VibeVoice
        ships without a text tokenizer: copy Qwen2.5's <code>tokenizer.json</code> (from <code>Qwen/Qwen2.5-1.5B</code>)
        into the folder, then import the folder on the Models screen.
      </p>
      {unusable.map((model) => (
        <p key={model.id} class="model-problem">
          {model.name}: {model.problem ?? "incomplete"}
        </p>
      ))}
      <div>
        <button type="button" class="primary" data-testid="speech-open-models" onClick={() => cake.showView("models")}>
          Open Models
        </button>
      </div>
    </section>
  );
}
