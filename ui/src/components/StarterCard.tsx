// The welcome card shown while the library has no usable model: it offers
// the app's default model (when there is one) or a download of a small one,
// and says why a download failed, with the way out.

import { completeModels } from "../state/app-state";
import { useAppState, useCake } from "./context";
import { DownloadProgress } from "./DownloadProgress";
import { FailureActionButton } from "./FailureActionButton";

export const STARTER_REPO = "HuggingFaceTB/SmolLM2-135M-Instruct";

export function StarterCard({ showProgress }: { showProgress: boolean }) {
  const state = useAppState();
  const cake = useCake();
  const defaultId = state.info?.default_model_id ?? null;
  const defaultModel = defaultId === null ? null : state.models.find((m) => m.id === defaultId);
  const hasModels = state.models.length > 0;
  // The first model should be ready to chat once it lands, without another click.
  const downloadAndLoad = async () => {
    const model = await cake.models.download(STARTER_REPO);
    if (model) await cake.models.load(model.id);
  };

  return (
    <section class="starter-card" data-testid="starter-card" aria-labelledby="starter-title">
      <h2 id="starter-title">Welcome to Cake</h2>
      <p>
        Cake runs language models on your own machine: nothing you type leaves it.
        {hasModels && completeModels(state).length === 0
          ? " None of the chat models in your library is complete yet."
          : " Your model library is empty, so let's get you a first model."}
      </p>
      <div class="starter-actions">
        {defaultModel ? (
          <button
            type="button"
            class="primary"
            data-testid="starter-load-default"
            disabled={state.loading !== null}
            onClick={() => cake.models.load(defaultModel.id)}
          >
            Use the default model ({defaultModel.name})
          </button>
        ) : null}
        <button
          type="button"
          class={defaultModel ? "" : "primary"}
          data-testid="starter-download"
          disabled={state.download !== null}
          onClick={() => void downloadAndLoad()}
        >
          Download SmolLM2 135M Instruct
        </button>
        <button type="button" class="link-button" onClick={() => cake.showView("models")}>
          Import or download another model…
        </button>
      </div>
      <p class="muted small">SmolLM2-135M-Instruct is a small, fast chat model from Hugging Face (a few hundred MB).</p>
      {showProgress && state.download ? <DownloadProgress download={state.download} /> : null}
      {state.downloadFailure && !state.download ? (
        <div class="starter-failure" role="alert" data-testid="starter-failure">
          <p>{state.downloadFailure.message}</p>
          {state.downloadFailure.action ? <FailureActionButton action={state.downloadFailure.action} /> : null}
        </div>
      ) : null}
    </section>
  );
}
