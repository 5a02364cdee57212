// A model's layers as one horizontal bar, a coloured segment per machine,
// as wide as the share of layers it runs.

import type { ClusterRun } from "../api/types";
import { layerSegments } from "../lib/cluster";

export function LayerBar({ run }: { run: ClusterRun }) {
  const segments = layerSegments(run);
  const summary = segments.map((segment) => `${segment.node}: ${segment.label}`).join("; ");

  return (
    <div
      class="layer-bar"
      data-testid="layer-bar"
      role="img"
      aria-label={`${run.total_layers} layers. ${summary || "No layers assigned yet."}`}
    >
      {segments.map((segment) => (
        <div
          key={segment.stage}
          class="layer-segment"
          data-testid="layer-segment"
          data-node={segment.node}
          data-layers={`${segment.start}-${segment.end}`}
          style={{ width: `${segment.percent}%`, background: segment.colour }}
          title={`${segment.node}: ${segment.label}`}
        >
          <span class="layer-segment-node">{segment.node}</span>
          <span class="layer-segment-layers">{segment.label}</span>
        </div>
      ))}
    </div>
  );
}
