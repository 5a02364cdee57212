// The cluster: its status (polled about once a second while the Cluster
// screen is open), saving its settings, and looking for workers.

import type { Api } from "../api/commands";
import type { ClusterSettingsUpdate, ClusterStatus } from "../api/types";
import { isEmptyUpdate } from "../lib/cluster";
import type { Store } from "./store";
import type { AppState } from "./app-state";
import type { Notices } from "./notices";

/** Pause between the end of one `cluster_status` poll and the start of the next. */
export const CLUSTER_POLL_INTERVAL_MS = 1000;

export function createClusterActions(store: Store<AppState>, api: Api, notices: Notices) {
  // Answers can arrive out of order (a poll started before a save may end
  // after it); only an answer to a later request replaces the status.
  let issued = 0;
  let applied = 0;
  let inFlight: Promise<ClusterStatus> | null = null;

  async function track(request: () => Promise<ClusterStatus>): Promise<ClusterStatus> {
    const sequence = ++issued;
    const status = await request();
    if (sequence > applied) {
      applied = sequence;
      store.update({ cluster: status });
    }
    return status;
  }

  /** One `cluster_status` request at a time: a caller during one shares it. */
  function fetchStatus(): Promise<ClusterStatus> {
    inFlight ??= track(() => api.clusterStatus()).finally(() => {
      inFlight = null;
    });
    return inFlight;
  }

  /** Fetch the status once; failures are reported unless `quiet`. */
  async function refresh(quiet = false): Promise<void> {
    try {
      await fetchStatus();
    } catch (error) {
      if (!quiet) notices.report(error);
    }
  }

  /**
   * Poll the status until the returned function is called. The next poll
   * starts a second after the previous one ended, so polls never overlap.
   * A failure is reported once, and again only after a poll succeeded.
   */
  function watch(): () => void {
    let active = true;
    let timer: ReturnType<typeof setTimeout> | null = null;
    let failing = false;

    async function poll(): Promise<void> {
      timer = null;
      try {
        await fetchStatus();
        failing = false;
      } catch (error) {
        if (!failing && active) notices.report(error);
        failing = true;
      }
      if (active) timer = setTimeout(poll, CLUSTER_POLL_INTERVAL_MS);
    }

    void poll();
    return () => {
      active = false;
      if (timer !== null) clearTimeout(timer);
    };
  }

  /** Send the changed settings; resolves whether they were saved (errors are reported). */
  async function save(update: ClusterSettingsUpdate): Promise<boolean> {
    if (isEmptyUpdate(update)) return true;
    if (store.get().clusterSaving) return false;
    store.update({ clusterSaving: true });
    try {
      await track(() => api.setClusterSettings(update));
      // A new context length or GPU setting unloads the model (the next
      // request loads it again the new way).
      if (update.context_length !== undefined || update.gpu !== undefined) {
        store.update({ loadedModelId: null, loadedGpu: null });
      }
      return true;
    } catch (error) {
      notices.report(error);
      return false;
    } finally {
      store.update({ clusterSaving: false });
    }
  }

  /**
   * Forget the stored cluster key. A worker cannot run without a key (the
   * backend refuses), so worker mode is turned off in the same update.
   */
  function forgetKey(): Promise<boolean> {
    const joined = store.get().cluster?.settings.join_as_worker ?? false;
    return save(joined ? { key: "", join_as_worker: false } : { key: "" });
  }

  /** A new cluster key to show in the form, or null (the error is reported). */
  async function generateKey(): Promise<string | null> {
    try {
      return (await api.generateClusterKey()).key;
    } catch (error) {
      notices.report(error);
      return null;
    }
  }

  /** Look for workers now (master only; takes `discovery_timeout_s` or so). */
  async function scan(): Promise<void> {
    if (store.get().clusterScanning) return;
    store.update({ clusterScanning: true });
    try {
      await track(() => api.scanCluster());
    } catch (error) {
      notices.report(error);
    } finally {
      store.update({ clusterScanning: false });
    }
  }

  /** Preview the plans for `modelId` over the workers that answer (master only; takes a moment). */
  async function preview(modelId: string): Promise<void> {
    if (store.get().clusterPreviewing) return;
    store.update({ clusterPreviewing: true });
    try {
      const preview = await api.previewCluster(modelId);
      store.update({ clusterPreview: { modelId, preview } });
    } catch (error) {
      notices.report(error);
    } finally {
      store.update({ clusterPreviewing: false });
    }
  }

  return { refresh, watch, save, forgetKey, generateKey, scan, preview };
}

export type ClusterActions = ReturnType<typeof createClusterActions>;
