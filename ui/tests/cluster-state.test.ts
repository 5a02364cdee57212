// Tests for the cluster actions against a fake Api: polling (no overlap,
// stops, errors reported once), saving settings, forgetting the key,
// looking for workers and previewing plans.

import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { ClusterStatus } from "../src/api/types";
import { createCake } from "../src/state";
import { CLUSTER_POLL_INTERVAL_MS } from "../src/state/cluster";
import { clusterStatus, createFakeApi, memoryStorage, model } from "./fake-api";

function setup() {
  const { api, server } = createFakeApi();
  const cake = createCake(api, memoryStorage());
  return { cake, api, server, state: () => cake.store.get() };
}

describe("cluster polling", () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it("polls about once a second until stopped", async () => {
    const { cake, api, state } = setup();
    const stop = cake.cluster.watch();
    await vi.advanceTimersByTimeAsync(0);
    expect(api.clusterStatus).toHaveBeenCalledTimes(1);
    expect(state().cluster?.role).toBe("off");

    await vi.advanceTimersByTimeAsync(3 * CLUSTER_POLL_INTERVAL_MS);
    expect(api.clusterStatus).toHaveBeenCalledTimes(4);

    stop();
    await vi.advanceTimersByTimeAsync(5 * CLUSTER_POLL_INTERVAL_MS);
    expect(api.clusterStatus).toHaveBeenCalledTimes(4);
  });

  it("never runs two polls at once", async () => {
    const { cake, api, server } = setup();
    let running = 0;
    let most = 0;
    vi.mocked(api.clusterStatus).mockImplementation(async () => {
      running++;
      most = Math.max(most, running);
      await new Promise((resolve) => setTimeout(resolve, 2500)); // a slow answer
      running--;
      return structuredClone(server.cluster);
    });
    const stop = cake.cluster.watch();
    // Reopening the screen while a poll is still out shares that poll.
    stop();
    const stopAgain = cake.cluster.watch();
    await vi.advanceTimersByTimeAsync(10_000);
    stopAgain();
    expect(most).toBe(1);
    // 0 → 2.5 s, 3.5 → 6 s, 7 → 9.5 s: the next starts 1 s after one ends.
    expect(api.clusterStatus).toHaveBeenCalledTimes(3);
  });

  it("reports a failing poll once, and again only after a success", async () => {
    const { cake, api, server, state } = setup();
    let failing = true;
    vi.mocked(api.clusterStatus).mockImplementation(async () => {
      if (failing) throw new Error("cannot reach Cake");
      return structuredClone(server.cluster);
    });
    const stop = cake.cluster.watch();
    await vi.advanceTimersByTimeAsync(5 * CLUSTER_POLL_INTERVAL_MS);
    expect(api.clusterStatus).toHaveBeenCalledTimes(6);
    expect(state().notices.map((n) => n.message)).toEqual(["cannot reach Cake"]);
    const first = state().notices[0].id;

    failing = false;
    await vi.advanceTimersByTimeAsync(CLUSTER_POLL_INTERVAL_MS);
    expect(state().cluster).not.toBeNull();
    failing = true;
    await vi.advanceTimersByTimeAsync(3 * CLUSTER_POLL_INTERVAL_MS);
    // Reported again: the same text replaces the old toast rather than stacking.
    expect(state().notices.map((n) => n.message)).toEqual(["cannot reach Cake"]);
    expect(state().notices[0].id).not.toBe(first);
    stop();
  });

  it("does not let an older poll overwrite a newer answer", async () => {
    const { cake, api, server, state } = setup();
    let answer: (status: ClusterStatus) => void = () => {};
    vi.mocked(api.clusterStatus).mockImplementationOnce(
      () => new Promise<ClusterStatus>((resolve) => (answer = resolve)),
    );
    const stop = cake.cluster.watch();
    const stale = structuredClone(server.cluster);
    await cake.cluster.save({ key: "secret" });
    expect(state().cluster?.role).toBe("master");
    answer(stale); // the poll sent before the save answers last
    await vi.advanceTimersByTimeAsync(0);
    expect(state().cluster?.role).toBe("master");
    stop();
  });
});

describe("cluster settings", () => {
  it("saves an update and shows the status it answers", async () => {
    const { cake, api, state } = setup();
    expect(await cake.cluster.save({ key: "secret", worker_port: 7000 })).toBe(true);
    expect(api.setClusterSettings).toHaveBeenCalledWith({ key: "secret", worker_port: 7000 });
    expect(state().cluster?.settings).toMatchObject({ key_set: true, cluster_id: null, worker_port: 7000 });
    expect(state().clusterSaving).toBe(false);
  });

  it("shows the model unloaded once the GPU setting or the context length changes", async () => {
    const { cake } = setup();
    cake.store.update({ loadedModelId: "default", loadedGpu: null });
    expect(await cake.cluster.save({ worker_port: 7000 })).toBe(true);
    expect(cake.store.get().loadedModelId).toBe("default");
    expect(await cake.cluster.save({ gpu: "on" })).toBe(true);
    expect(cake.store.get().loadedModelId).toBeNull();
  });

  it("generates a key without saving it", async () => {
    const { cake, api, state } = setup();
    const key = await cake.cluster.generateKey();
    expect(key).toMatch(/^cake1-[a-z2-7]{8}(-[a-z]{6}){7}$/);
    expect(api.setClusterSettings).not.toHaveBeenCalled();
    expect(await cake.cluster.save({ key: key! })).toBe(true);
    expect(state().cluster?.settings).toMatchObject({ key_set: true, cluster_id: "ab23cd45", key_warning: null });
  });

  it("does not call the backend for an empty update", async () => {
    const { cake, api } = setup();
    expect(await cake.cluster.save({})).toBe(true);
    expect(api.setClusterSettings).not.toHaveBeenCalled();
  });

  it("shows the backend's refusal as a notice", async () => {
    const { cake, state } = setup();
    expect(await cake.cluster.save({ join_as_worker: true })).toBe(false);
    expect(state().notices.map((n) => n.message)).toEqual(["set a cluster key before joining as a worker"]);
    expect(state().clusterSaving).toBe(false);
  });

  it("forgets the key (leaving worker mode, which needs one)", async () => {
    const { cake, api, server, state } = setup();
    server.cluster = clusterStatus({ role: "master", settings: { key_set: true, cluster_id: "ab23cd45" } });
    await cake.cluster.refresh();
    expect(await cake.cluster.forgetKey()).toBe(true);
    expect(api.setClusterSettings).toHaveBeenLastCalledWith({ key: "" });
    expect(state().cluster?.role).toBe("off");

    await cake.cluster.save({ key: "secret", join_as_worker: true });
    expect(state().cluster?.role).toBe("worker");
    expect(await cake.cluster.forgetKey()).toBe(true);
    expect(api.setClusterSettings).toHaveBeenLastCalledWith({ key: "", join_as_worker: false });
  });
});

describe("looking for workers", () => {
  it("marks the scan as running and stores its answer", async () => {
    const { cake, api, server, state } = setup();
    server.cluster = clusterStatus({ role: "master", settings: { key_set: true } });
    const scan = cake.cluster.scan();
    expect(state().clusterScanning).toBe(true);
    await scan;
    expect(api.scanCluster).toHaveBeenCalledTimes(1);
    expect(state().clusterScanning).toBe(false);
    expect(state().cluster?.role).toBe("master");
  });

  it("reports a failed scan", async () => {
    const { cake, state } = setup();
    await cake.cluster.scan();
    expect(state().notices).toHaveLength(1);
    expect(state().clusterScanning).toBe(false);
  });
});

describe("previewing plans", () => {
  it("marks the preview as running and keeps its answer with its model", async () => {
    const { cake, api, server, state } = setup();
    server.cluster = clusterStatus({ role: "master", settings: { key_set: true } });
    server.models.push(model("smol"));
    const modelId = "smol";
    const preview = cake.cluster.preview(modelId);
    expect(state().clusterPreviewing).toBe(true);
    await preview;
    expect(api.previewCluster).toHaveBeenCalledWith(modelId);
    expect(state().clusterPreviewing).toBe(false);
    expect(state().clusterPreview?.modelId).toBe(modelId);
    expect(state().clusterPreview?.preview.chosen).toBe(0);
  });

  it("reports a failed preview and keeps the last one", async () => {
    const { cake, state } = setup();
    await cake.cluster.preview("default");
    expect(state().notices).toHaveLength(1);
    expect(state().clusterPreviewing).toBe(false);
    expect(state().clusterPreview).toBeNull();
  });
});

describe("start", () => {
  it("reads the cluster status quietly", async () => {
    const { cake, api, state } = setup();
    vi.mocked(api.clusterStatus).mockRejectedValueOnce(new Error("unknown command `cluster_status`"));
    await cake.start();
    expect(state().notices).toEqual([]);
  });
});
