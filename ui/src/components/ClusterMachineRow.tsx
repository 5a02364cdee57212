// One machine of the cluster: name, address, state, and what it reported
// about itself (OS, CPU, devices, memory, speed).

import type { Machine } from "../api/types";
import { MACHINE_STATE_LABELS, formatGigabytes } from "../lib/cluster";

export function ClusterMachineRow({ machine }: { machine: Machine }) {
  const { info } = machine;
  return (
    <li class={`machine-row state-${machine.state}`} data-testid="cluster-machine" data-state={machine.state}>
      <div class="machine-title">
        <span class="machine-name">{machine.name}</span>
        {machine.address ? <span class="machine-address">{machine.address}</span> : null}
        <span class={`badge machine-state machine-${machine.state}`} data-testid="cluster-machine-state">
          {MACHINE_STATE_LABELS[machine.state]}
        </span>
      </div>
      {machine.also_named?.length ? (
        <div class="muted small" data-testid="cluster-machine-also-named">
          Also found as {machine.also_named.join(", ")}: one machine, planned once.
        </div>
      ) : null}
      {machine.problem ? (
        <div class="machine-problem" data-testid="cluster-machine-problem">
          {machine.problem}
        </div>
      ) : null}
      {info ? (
        <dl class="model-facts machine-facts">
          <div>
            <dt>OS</dt>
            <dd>{info.os || "—"}</dd>
          </div>
          <div>
            <dt>CPU</dt>
            <dd>{info.cpu || "—"}</dd>
          </div>
          <div>
            <dt>Devices</dt>
            <dd>{info.devices.length > 0 ? info.devices.join(", ") : "—"}</dd>
          </div>
          <div>
            <dt>Memory</dt>
            <dd>{formatGigabytes(info.memory_bytes)}</dd>
          </div>
          <div>
            <dt>Speed</dt>
            <dd>{formatGigabytes(info.bytes_per_second)}/s</dd>
          </div>
        </dl>
      ) : (
        <div class="muted small">No details reported.</div>
      )}
    </li>
  );
}
