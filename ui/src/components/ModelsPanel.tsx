// The Models screen: the library list with its actions, hub search, import
// and download, and (in the desktop app) serving the OpenAI API to other
// programs.

import { describePlacement } from "../lib/gpu";
import { desktopSession } from "../transport";
import { useAppState, useCake } from "./context";
import { DownloadForm } from "./DownloadForm";
import { HubSearch } from "./HubSearch";
import { ImportForm } from "./ImportForm";
import { ModelRow } from "./ModelRow";
import { OpenAiApiSwitch } from "./OpenAiApiSwitch";
import { StarterCard } from "./StarterCard";
import { SidebarToggle } from "./SidebarToggle";

export function ModelsPanel() {
  const state = useAppState();
  const cake = useCake();
  const loaded = state.models.find((m) => m.id === state.loadedModelId);
  const placement = describePlacement(state.loadedGpu);

  return (
    <section class="models-panel" aria-labelledby="models-title">
      <header class="view-header">
        <SidebarToggle />
        <h1 id="models-title">Models</h1>
        <span class="muted" data-testid="loaded-model">
          {loaded ? `Loaded: ${loaded.name}` : "No model loaded"}
        </span>
        {loaded && placement !== null ? (
          <span class="muted loaded-gpu" data-testid="loaded-gpu" title={placement}>
            {placement}
          </span>
        ) : null}
        <button type="button" class="header-end" onClick={() => cake.showView("chat")}>
          Back to chat
        </button>
      </header>
      <div class="models-body">
        {state.modelsReady && state.models.length === 0 ? <StarterCard showProgress={false} /> : null}
        <div class="library">
          <h2 class="section-title">Library</h2>
          {!state.modelsReady ? (
            <p class="muted">Loading the library…</p>
          ) : (
            <ul class="model-list" data-testid="model-list">
              {state.models.map((model) => (
                <ModelRow key={model.id} model={model} />
              ))}
            </ul>
          )}
          {state.modelsReady && state.models.length === 0 ? (
            <p class="muted">No models yet. Download one or import a file.</p>
          ) : null}
        </div>
        <aside class="add-models" aria-label="Add models">
          <h2 class="section-title">Add a model</h2>
          <HubSearch />
          <DownloadForm />
          <ImportForm />
          <h2 class="section-title">Other programs</h2>
          {desktopSession ? (
            <OpenAiApiSwitch session={desktopSession} />
          ) : (
            <p class="muted small" data-testid="served-api">
              Programs reach the OpenAI API of this <code>cake serve</code> at <code>{location.origin}/v1</code>.
            </p>
          )}
        </aside>
      </div>
    </section>
  );
}
