// The placement preview: for a text model of the library, the plans over
// the machines that answer now (this machine alone, all of them, the
// fastest subset), each with its layers and memory per machine, its
// predicted speed and time to first token and what limits it, the one the
// preview picks marked, and why. Nothing is loaded.

import { useState } from "preact/hooks";
import type { PreviewOption } from "../api/types";
import { formatSeconds, formatTokensPerSecond, limitText } from "../lib/cluster";
import { formatBytes } from "../lib/format";
import { describeStageGpu } from "../lib/gpu";
import { completeModels, effectiveModelId } from "../state/app-state";
import { useAppState, useCake } from "./context";

export function ClusterPreview() {
  const state = useAppState();
  const cake = useCake();
  const models = completeModels(state, "text");
  const [picked, setPicked] = useState<string | null>(null);
  const modelId = picked ?? effectiveModelId(state, null);
  const shown = state.clusterPreview;

  return (
    <section class="cluster-section" aria-labelledby="cluster-preview-title" data-testid="cluster-preview">
      <div class="section-head">
        <h2 id="cluster-preview-title" class="section-title">
          Plans
        </h2>
        <select
          aria-label="Model to plan"
          data-testid="cluster-preview-model"
          value={modelId ?? ""}
          onChange={(event) => setPicked((event.target as HTMLSelectElement).value)}
        >
          {models.map((model) => (
            <option key={model.id} value={model.id}>
              {model.name}
            </option>
          ))}
        </select>
        <button
          type="button"
          data-testid="cluster-preview-run"
          disabled={modelId === null || state.clusterPreviewing}
          aria-busy={state.clusterPreviewing}
          onClick={() => modelId !== null && void cake.cluster.preview(modelId)}
        >
          {state.clusterPreviewing ? "Measuring…" : "Preview plans"}
        </button>
      </div>
      {shown === null ? (
        <p class="muted small">
          See, before loading, how a model would be spread over the machines found and how fast each plan would run.
        </p>
      ) : (
        <>
          <div class="table-wrap">
            <table class="stage-table preview-table" data-testid="cluster-preview-table">
              <thead>
                <tr>
                  <th scope="col">Plan</th>
                  <th scope="col">Layers, memory</th>
                  <th scope="col">Predicted</th>
                  <th scope="col">Limited by</th>
                </tr>
              </thead>
              <tbody>
                {shown.preview.options.map((option, index) => (
                  <PreviewRow key={option.label} option={option} chosen={shown.preview.chosen === index} />
                ))}
              </tbody>
            </table>
          </div>
          <p class="preview-reason" data-testid="cluster-preview-reason">
            {shown.preview.reason}
          </p>
        </>
      )}
    </section>
  );
}

function PreviewRow({ option, chosen }: { option: PreviewOption; chosen: boolean }) {
  const { plan, prediction } = option;
  return (
    <tr class={chosen ? "chosen" : undefined} data-testid="cluster-preview-option" data-chosen={chosen}>
      <td>
        <div class="machine-name">{option.label}</div>
        {chosen ? <span class="badge">picked</span> : null}
      </td>
      <td>
        {option.refused !== null ? <div class="stage-lost">Cannot run: {option.refused}</div> : null}
        {plan?.stages
          .filter((stage) => stage.layers.end > stage.layers.start)
          .map((stage) => (
            <div key={stage.node} class="small" data-testid="cluster-preview-stage">
              {stage.node}: layers {stage.layers.start}–{stage.layers.end - 1}, {formatBytes(stage.memory_bytes)}
              {describeStageGpu(stage) !== null ? `; ${describeStageGpu(stage)}` : null}
            </div>
          ))}
      </td>
      <td class="numeric">
        {prediction ? (
          <>
            <div>{formatTokensPerSecond(prediction.decode_tokens_per_second)}</div>
            <div class="muted small">
              first token in {formatSeconds(prediction.first_token_seconds)} ({prediction.prompt_tokens}-token prompt)
            </div>
          </>
        ) : (
          "—"
        )}
      </td>
      <td>
        {prediction ? (
          <>
            <div class="small">replies: {limitText(prediction.decode_limit)}</div>
            <div class="muted small">prompts: {limitText(prediction.prompt_limit)}</div>
          </>
        ) : null}
      </td>
    </tr>
  );
}
