// The model a master spread over the machines: the layer bar and the
// table of stages (who holds which layers, and why).

import type { ClusterRun } from "../api/types";
import { stageColours } from "../lib/cluster";
import { ClusterStages } from "./ClusterStages";
import { LayerBar } from "./LayerBar";

export function ClusterRunView({ run }: { run: ClusterRun }) {
  const colours = stageColours(run);
  const machines = new Set(run.stages.map((stage) => stage.node)).size;

  return (
    <section class="cluster-section cluster-run" aria-labelledby="cluster-run-title">
      <div class="section-head">
        <h2 id="cluster-run-title" class="section-title">
          {run.model_name}
        </h2>
        <span class="muted small">
          {run.total_layers} layers over {machines} {machines === 1 ? "machine" : "machines"}, a context of{" "}
          {run.context_length} tokens
        </span>
        {!run.ready ? (
          <span class="badge run-loading" data-testid="cluster-run-loading" aria-live="polite">
            loading…
          </span>
        ) : null}
      </div>
      <LayerBar run={run} />
      {run.decode_steps ? (
        <p class="muted small" data-testid="cluster-decode-steps">
          Several conversations at once:{" "}
          {run.decode_steps.pipelined ? "pipelined over the machines" : "one machine after another"} (
          {run.decode_steps.why}).
        </p>
      ) : null}
      <ClusterStages run={run} colours={colours} />
    </section>
  );
}
