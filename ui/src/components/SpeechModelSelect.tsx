// The Speech screen's model picker: complete speech models only.

import { modelOptionLabel } from "../lib/format";
import { completeModels, speechModelId } from "../state/app-state";
import { useAppState, useCake } from "./context";

export function SpeechModelSelect() {
  const state = useAppState();
  const cake = useCake();
  const models = completeModels(state, "speech");
  const modelId = speechModelId(state);
  if (models.length === 0) return null;
  return (
    <label class="model-picker">
      <span class="visually-hidden">Speech model</span>
      <select
        data-testid="speech-model"
        value={modelId ?? ""}
        disabled={state.speaking !== null}
        onChange={(event) => cake.speech.edit({ modelId: event.currentTarget.value })}
      >
        {models.map((model) => (
          <option key={model.id} value={model.id}>
            {modelOptionLabel(model, state.loadedModelId)}
          </option>
        ))}
      </select>
    </label>
  );
}
