// The Cluster screen: the cluster settings, what this machine is in the
// cluster, and, by role, the machines and the model's layers spread over
// them (master) or the masters served (worker). The status is polled about
// once a second while the screen is open.

import { useEffect } from "preact/hooks";
import { roleText } from "../lib/cluster";
import { ClusterMachines } from "./ClusterMachines";
import { ClusterMasters } from "./ClusterMasters";
import { ClusterPreview } from "./ClusterPreview";
import { ClusterRunView } from "./ClusterRunView";
import { ClusterSettingsForm } from "./ClusterSettingsForm";
import { useAppState, useCake } from "./context";
import { SidebarToggle } from "./SidebarToggle";

export function ClusterPanel() {
  const state = useAppState();
  const cake = useCake();
  const status = state.cluster;

  useEffect(() => cake.cluster.watch(), [cake]);

  return (
    <section class="cluster-panel" data-testid="cluster-view" aria-labelledby="cluster-title">
      <header class="view-header">
        <SidebarToggle />
        <h1 id="cluster-title">Cluster</h1>
        <button type="button" class="header-end" onClick={() => cake.showView("chat")}>
          Back to chat
        </button>
      </header>
      <div class="cluster-body">
        {!status ? (
          <p class="muted">Reading the cluster status…</p>
        ) : (
          <>
            <div class="cluster-main">
              <p class={`cluster-role role-${status.role}`} data-testid="cluster-role">
                {roleText(status)}
              </p>
              {status.worker_error ? (
                <p class="cluster-problem" role="alert" data-testid="cluster-worker-error">
                  Cannot join as a worker: {status.worker_error}
                </p>
              ) : null}
              {status.role === "off" ? (
                <p class="muted cluster-intro">
                  Set a cluster key to use this machine as a master: models you load are then spread over the workers
                  found on your network. Tick “Join as worker” to serve other machines instead.
                </p>
              ) : null}
              {status.role === "master" ? (
                <>
                  <ClusterMachines
                    machines={status.machines}
                    scanning={state.clusterScanning || state.clusterPreviewing}
                  />
                  <ClusterPreview />
                  {status.run ? <ClusterRunView run={status.run} /> : null}
                </>
              ) : null}
              {status.role === "worker" && status.worker ? <ClusterMasters worker={status.worker} /> : null}
            </div>
            <aside class="cluster-side" aria-label="Cluster settings">
              <ClusterSettingsForm settings={status.settings} gpus={status.gpus} saving={state.clusterSaving} />
            </aside>
          </>
        )}
      </div>
    </section>
  );
}
