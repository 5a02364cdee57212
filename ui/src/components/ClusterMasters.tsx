// On a worker: the masters it serves, with the layers each gave it, the
// weights received so far and the forward passes run.

import type { WorkerService } from "../api/types";
import { layerLabel, transferFraction } from "../lib/cluster";
import { formatBytes } from "../lib/format";
import { ProgressBar } from "./ProgressBar";

export function ClusterMasters({ worker }: { worker: WorkerService }) {
  return (
    <section class="cluster-section" aria-labelledby="cluster-masters-title">
      <div class="section-head">
        <h2 id="cluster-masters-title" class="section-title">
          Masters served
        </h2>
      </div>
      <ul class="machine-list" data-testid="cluster-masters">
        {worker.masters.map((master) => {
          const fraction = transferFraction(master.weights_received, master.weights_needed);
          const receiving = master.weights_received < master.weights_needed;
          return (
            <li key={master.address} class="machine-row" data-testid="cluster-master">
              <div class="machine-title">
                <span class="machine-address">{master.address}</span>
                <span class="muted small">{master.layers ? layerLabel(master.layers) : "no layers yet"}</span>
              </div>
              {receiving ? (
                <div class="load-progress">
                  <ProgressBar fraction={fraction} label={`Weights from ${master.address}`} />
                  <span class="muted small">
                    Weights {formatBytes(master.weights_received)} of {formatBytes(master.weights_needed)}
                  </span>
                </div>
              ) : null}
              <dl class="model-facts machine-facts">
                {!receiving && master.weights_needed > 0 ? (
                  <div>
                    <dt>Weights</dt>
                    <dd>{formatBytes(master.weights_needed)} received</dd>
                  </div>
                ) : null}
                <div>
                  <dt>Forward passes</dt>
                  <dd>{master.forwards.toLocaleString()}</dd>
                </div>
              </dl>
            </li>
          );
        })}
      </ul>
      {worker.masters.length === 0 ? (
        <p class="muted small">No master connected yet. Masters with the same key find this machine on the network.</p>
      ) : null}
    </section>
  );
}
