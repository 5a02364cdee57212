// The machines a master knows (this one first, then the workers seen) and
// the button to look for workers now.

import type { Machine } from "../api/types";
import { ClusterMachineRow } from "./ClusterMachineRow";
import { useCake } from "./context";

interface Props {
  machines: Machine[];
  scanning: boolean;
}

export function ClusterMachines({ machines, scanning }: Props) {
  const cake = useCake();
  const workers = machines.filter((machine) => machine.state !== "this_machine");

  return (
    <section class="cluster-section" aria-labelledby="cluster-machines-title">
      <div class="section-head">
        <h2 id="cluster-machines-title" class="section-title">
          Machines
        </h2>
        <button
          type="button"
          data-testid="cluster-scan"
          disabled={scanning}
          aria-busy={scanning}
          onClick={() => void cake.cluster.scan()}
        >
          {scanning ? "Looking for workers…" : "Look for workers"}
        </button>
      </div>
      <ul class="machine-list" data-testid="cluster-machines">
        {machines.map((machine) => (
          <ClusterMachineRow key={`${machine.name}@${machine.address ?? ""}`} machine={machine} />
        ))}
      </ul>
      {workers.length === 0 && scanning ? (
        <p class="muted small" data-testid="cluster-looking">
          Looking for workers on the network…
        </p>
      ) : null}
      {workers.length === 0 && !scanning ? (
        <p class="muted small" data-testid="cluster-no-workers">
          No workers seen yet. Start Cake with the same cluster key and “Join as worker” on another machine, then look
          for workers.
        </p>
      ) : null}
    </section>
  );
}
