// The legend of the layer bar: one row per stage with its colour, layers,
// the memory planned for them (weights and KV cache), the planner's reason, compute share, traffic and weight transfer
// (a progress bar while the weights are still being sent).

import type { ClusterRun, ClusterStage } from "../api/types";
import {
  formatSecondsPerToken,
  formatShare,
  layerCount,
  layerRange,
  nodeColour,
  transferFraction,
} from "../lib/cluster";
import { formatBytes } from "../lib/format";
import { describeStageGpu } from "../lib/gpu";
import { ProgressBar } from "./ProgressBar";

interface Props {
  run: ClusterRun;
  /** Colour per node, as in the layer bar. */
  colours: Map<string, string>;
}

export function ClusterStages({ run, colours }: Props) {
  return (
    <div class="table-wrap">
      <table class="stage-table" data-testid="cluster-stages">
        <thead>
          <tr>
            <th scope="col">Machine</th>
            <th scope="col">Layers, memory</th>
            <th scope="col">Why</th>
            <th scope="col">Compute</th>
            <th scope="col">Sent / received</th>
          </tr>
        </thead>
        <tbody>
          {run.stages.map((stage, index) => (
            <tr
              key={index}
              class={stage.lost ? "lost" : layerCount(stage.layers) === 0 ? "empty" : undefined}
              data-testid="cluster-stage"
              data-node={stage.node}
            >
              <td>
                <div class="stage-node">
                  <span
                    class="swatch"
                    style={{ background: colours.get(stage.node) ?? nodeColour(stage.node) }}
                    aria-hidden="true"
                  />
                  <span class="machine-name">{stage.node}</span>
                </div>
                <div class="machine-address">{stage.address ?? "this machine"}</div>
                {stage.lost ? (
                  <div class="stage-lost" data-testid="cluster-stage-lost">
                    Lost: {stage.lost}
                  </div>
                ) : null}
              </td>
              <td class="numeric">
                {layerRange(stage.layers)}
                <div
                  class="muted small"
                  data-testid="cluster-stage-memory"
                  title="All the memory planned: weights, the KV cache at the full context, working memory and a margin"
                >
                  {formatBytes(stage.memory_bytes)}
                </div>
                <div class="muted small" title="Weights as stored">
                  {formatBytes(stage.bytes)} weights
                </div>
                <div class="muted small" title="The KV cache at the full context">
                  {formatBytes(stage.kv_bytes)} KV cache
                </div>
                {describeStageGpu(stage) !== null ? (
                  <div class="small" data-testid="cluster-stage-gpu" title="Weights and KV cache in the GPU's memory">
                    {describeStageGpu(stage)}
                  </div>
                ) : null}
              </td>
              <td class="stage-reason">
                {stage.reason}
                {stage.speed_doubt ? (
                  <div class="stage-doubt" data-testid="cluster-stage-doubt">
                    {stage.speed_doubt}
                  </div>
                ) : null}
              </td>
              <td class="numeric">
                {formatShare(stage.compute_share)}
                <div class="muted small" title="The planner's estimate of this stage's time per token">
                  est. {formatSecondsPerToken(stage.seconds_per_token)}
                </div>
              </td>
              <td class="stage-traffic">
                <div class="numeric">
                  {stage.address === null
                    ? "—"
                    : `${formatBytes(stage.bytes_sent)} / ${formatBytes(stage.bytes_received)}`}
                </div>
                <Transfer stage={stage} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/** The weight transfer of the current load: a progress bar while it runs. */
function Transfer({ stage }: { stage: ClusterStage }) {
  const fraction = transferFraction(stage.weights_sent, stage.weights_to_send);
  if (fraction === null) return null;
  if (stage.weights_sent < stage.weights_to_send) {
    return (
      <div class="load-progress stage-transfer" data-testid="cluster-stage-transfer">
        <ProgressBar fraction={fraction} label={`Weights sent to ${stage.node}`} />
        <span class="muted small">
          weights {formatBytes(stage.weights_sent)} of {formatBytes(stage.weights_to_send)}
        </span>
      </div>
    );
  }
  return <div class="muted small">weights sent ({formatBytes(stage.weights_to_send)})</div>;
}
