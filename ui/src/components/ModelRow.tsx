// One model of the library: its facts, status, and Load / Delete actions.

import { useState } from "preact/hooks";
import type { ModelEntry, ModelKind } from "../api/types";
import { formatBytes, formatParameters } from "../lib/format";
import { modelKind } from "../state/app-state";
import { useAppState, useCake } from "./context";
import { ConfirmDialog } from "./ConfirmDialog";
import { ProgressBar } from "./ProgressBar";

const STATUS_LABELS: Record<ModelEntry["status"], string> = {
  complete: "Complete",
  incomplete: "Incomplete",
  "not-a-model": "Not a model",
  unsupported: "Unsupported",
};

const KIND_LABELS: Record<ModelKind, string> = { text: "Chat", speech: "Speech", embedding: "Embeddings" };

export function ModelRow({ model }: { model: ModelEntry }) {
  const state = useAppState();
  const cake = useCake();
  const [confirming, setConfirming] = useState(false);
  const loaded = state.loadedModelId === model.id;
  const loading = state.loading?.id === model.id ? state.loading : null;
  const filesStay = model.source !== "hf-cache";

  return (
    <li class={`model-row${loaded ? " loaded" : ""}`} data-testid="model-row" data-model-id={model.id}>
      <div class="model-main">
        <div class="model-title">
          <span class="model-name">{model.name}</span>
          {model.source === "default" ? (
            <span class="badge" data-testid="model-default">
              Default
            </span>
          ) : null}
          <span class={`badge status-${model.status}`} data-testid="model-status">
            {STATUS_LABELS[model.status]}
          </span>
          {modelKind(model) !== "text" ? (
            <span
              class="badge kind-badge"
              data-testid="model-kind"
              title={
                modelKind(model) === "embedding"
                  ? "Makes embeddings for /v1/embeddings and /api/embed; it does not chat"
                  : undefined
              }
            >
              {KIND_LABELS[modelKind(model)]}
            </span>
          ) : null}
          {loaded ? (
            <span class="badge loaded-badge" data-testid="model-loaded">
              Loaded
            </span>
          ) : null}
          <div class="model-actions">
            {loaded ? (
              <button type="button" data-testid="model-unload" onClick={() => cake.models.unload()}>
                Unload
              </button>
            ) : (
              <button
                type="button"
                class="primary"
                data-testid="model-load"
                disabled={model.status !== "complete" || state.loading !== null}
                onClick={() => cake.models.load(model.id)}
              >
                {loading ? "Loading…" : "Load"}
              </button>
            )}
            <button
              type="button"
              class="danger-outline"
              data-testid="model-delete"
              disabled={loading !== null}
              onClick={() => setConfirming(true)}
            >
              Delete
            </button>
          </div>
        </div>
        <dl class="model-facts">
          <div>
            <dt>Architecture</dt>
            <dd>{model.architecture ?? "—"}</dd>
          </div>
          <div>
            <dt>Parameters</dt>
            <dd>{formatParameters(model.parameters)}</dd>
          </div>
          <div>
            <dt>Type</dt>
            <dd>{model.dtype ?? "—"}</dd>
          </div>
          <div>
            <dt>Quantization</dt>
            <dd data-testid="model-quantization">{model.quantization ?? "none"}</dd>
          </div>
          <div>
            <dt>Size</dt>
            <dd>{formatBytes(model.size_bytes)}</dd>
          </div>
        </dl>
        <div class="model-path muted" title={model.path}>
          {model.path}
        </div>
        {model.problem ? <div class="model-problem">{model.problem}</div> : null}
        {loading ? (
          <div class="load-progress" aria-live="polite">
            <ProgressBar fraction={loading.fraction} label={`Loading ${model.name}`} />
            <span class="muted small">{loading.message}</span>
          </div>
        ) : null}
      </div>
      {confirming ? (
        <ConfirmDialog
          title={`Delete ${model.name}?`}
          message={
            filesStay
              ? `${model.name} will be removed from the list. Its files stay where they are: ${model.path}`
              : `The files of ${model.name} (${formatBytes(model.size_bytes)}) will be deleted from the Hugging Face cache.`
          }
          confirmLabel={filesStay ? "Remove" : "Delete files"}
          onCancel={() => setConfirming(false)}
          onConfirm={() => {
            setConfirming(false);
            void cake.models.remove(model.id);
          }}
        />
      ) : null}
    </li>
  );
}
