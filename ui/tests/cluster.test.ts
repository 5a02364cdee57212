// Tests for the Cluster screen's pure helpers: the layer bar's segments and
// colours, and the settings form's changed-fields diff.

import { describe, expect, it } from "vitest";
import type { ClusterRun, ClusterSettings, ClusterStage } from "../src/api/types";
import {
  NODE_PALETTE,
  formFromSettings,
  formatGigabytes,
  formatSecondsPerToken,
  formatShare,
  isEmptyUpdate,
  keyDescription,
  layerLabel,
  layerRange,
  layerSegments,
  nodeColour,
  nodeColours,
  isWorkerAddress,
  parseInterfaces,
  parseWorkerAddresses,
  roleText,
  settingsChanges,
  stageColours,
  transferFraction,
} from "../src/lib/cluster";
import { clusterStatus } from "./fake-api";

function stage(node: string, layers: [number, number], extra: Partial<ClusterStage> = {}): ClusterStage {
  return {
    node,
    address: `${node}.local:7000`,
    layers,
    bytes: 1e9,
    kv_bytes: 1e8,
    memory_bytes: 1.2e9,
    gpu_layers: [],
    gpu_memory_bytes: 0,
    seconds_per_token: 0.01,
    reason: "fastest free memory",
    compute_share: 0.5,
    bytes_sent: 0,
    bytes_received: 0,
    weights_sent: 0,
    weights_to_send: 0,
    lost: null,
    claimed_bytes_per_second: null,
    measured_bytes_per_second: null,
    speed_doubt: null,
    ...extra,
  };
}

function run(stages: ClusterStage[], total_layers = 32): ClusterRun {
  return { model_name: "Llama", total_layers, context_length: 4096, ready: true, stages };
}

const sum = (values: number[]) => values.reduce((a, b) => a + b, 0);

describe("layerSegments", () => {
  it("gives one segment per stage with layers, widths proportional and adding up to 100", () => {
    const segments = layerSegments(
      run([
        stage("mac", [0, 8], { address: null }),
        stage("idle", [8, 8]),
        stage("pc", [8, 24]),
        stage("pi", [24, 32]),
      ]),
    );
    expect(segments.map((s) => s.node)).toEqual(["mac", "pc", "pi"]);
    expect(segments.map((s) => s.stage)).toEqual([0, 2, 3]);
    expect(segments.map((s) => s.percent)).toEqual([25, 50, 25]);
    expect(sum(segments.map((s) => s.percent))).toBe(100);
    expect(segments.map((s) => [s.start, s.end])).toEqual([
      [0, 8],
      [8, 24],
      [24, 32],
    ]);
  });

  it("labels the layers with the last one inclusive", () => {
    const segments = layerSegments(run([stage("a", [0, 12]), stage("b", [12, 13]), stage("c", [13, 32])]));
    expect(segments.map((s) => s.label)).toEqual(["layers 0–11", "layer 12", "layers 13–31"]);
  });

  it("keeps the sum at 100 for uneven splits", () => {
    const segments = layerSegments(run([stage("a", [0, 1]), stage("b", [1, 2]), stage("c", [2, 3])], 3));
    expect(sum(segments.map((s) => s.percent))).toBeCloseTo(100, 9);
    for (const segment of segments) expect(segment.percent).toBeCloseTo(100 / 3, 9);
  });

  it("skips reversed ranges and has no segments when no stage holds layers", () => {
    expect(layerSegments(run([stage("a", [0, 0]), stage("b", [5, 3])]))).toEqual([]);
    expect(layerSegments(run([]))).toEqual([]);
  });

  it("colours segments like the stage legend", () => {
    const r = run([stage("a", [0, 10]), stage("b", [10, 20]), stage("c", [20, 32])]);
    const colours = stageColours(r);
    for (const segment of layerSegments(r)) expect(segment.colour).toBe(colours.get(segment.node));
  });
});

describe("layer texts", () => {
  it("writes ranges inclusively", () => {
    expect(layerRange([0, 12])).toBe("0–11");
    expect(layerRange([7, 8])).toBe("7");
    expect(layerRange([4, 4])).toBe("none");
    expect(layerLabel([0, 12])).toBe("layers 0–11");
    expect(layerLabel([7, 8])).toBe("layer 7");
    expect(layerLabel([4, 4])).toBe("no layers");
  });
});

describe("node colours", () => {
  const names = ["mac-studio", "gpu-box", "raspberrypi", "laptop", "this-machine"];

  it("gives a name the same colour every time", () => {
    for (const name of names) {
      expect(nodeColour(name)).toBe(nodeColour(name));
      expect(NODE_PALETTE).toContain(nodeColour(name));
    }
    expect(nodeColours(names)).toEqual(nodeColours(names));
  });

  it("does not depend on the order of the nodes", () => {
    const forward = nodeColours(names);
    const backward = nodeColours([...names].reverse());
    for (const name of names) expect(backward.get(name)).toBe(forward.get(name));
  });

  it("gives distinct colours while the palette lasts", () => {
    const many = Array.from({ length: NODE_PALETTE.length }, (_, i) => `worker-${i}`);
    const colours = nodeColours(many);
    expect(new Set(colours.values()).size).toBe(NODE_PALETTE.length);
    // Beyond the palette colours repeat, but every node still gets one.
    const more = nodeColours([...many, "one-more"]);
    expect(more.size).toBe(NODE_PALETTE.length + 1);
    expect(NODE_PALETTE).toContain(more.get("one-more"));
  });

  it("gives a lone node its own preferred colour", () => {
    for (const name of names) expect(nodeColours([name]).get(name)).toBe(nodeColour(name));
  });

  it("counts a repeated node once", () => {
    const colours = nodeColours(["a", "b", "a"]);
    expect(colours.size).toBe(2);
  });
});

describe("settings form", () => {
  const settings: ClusterSettings = {
    key_set: true,
    cluster_id: "ab23cd45",
    key_warning: null,
    key_storage: "keyring",
    from_command_line: false,
    join_as_worker: false,
    worker_name: "studio",
    worker_port: 7000,
    mdns_interfaces: ["eth0"],
    discovery_timeout_s: 3,
    worker_addresses: ["10.0.0.5:10128"],
    context_length: 0,
    gpu: "off",
  };
  const form = formFromSettings(settings);

  it("starts from the settings with an empty key", () => {
    expect(form).toEqual({
      key: "",
      join_as_worker: false,
      worker_name: "studio",
      worker_port: "7000",
      mdns_interfaces: "eth0",
      discovery_timeout_s: "3",
      worker_addresses: "10.0.0.5:10128",
      context_length: "",
      gpu: "off",
    });
  });

  it("sends the GPU setting when it changed", () => {
    expect(settingsChanges(settings, { ...form, gpu: "auto" }).update).toEqual({ gpu: "auto" });
  });

  it("sends nothing when nothing changed", () => {
    const changes = settingsChanges(settings, form);
    expect(changes).toEqual({ update: {}, problem: null });
    expect(isEmptyUpdate(changes.update)).toBe(true);
  });

  it("keeps the stored key when the key field is empty or blank", () => {
    expect(settingsChanges(settings, { ...form, key: "   " }).update).toEqual({});
    expect(settingsChanges(settings, { ...form, key: " new secret " }).update).toEqual({ key: "new secret" });
  });

  it("sends only the fields that changed", () => {
    expect(settingsChanges(settings, { ...form, join_as_worker: true }).update).toEqual({ join_as_worker: true });
    expect(settingsChanges(settings, { ...form, worker_name: " box " }).update).toEqual({ worker_name: "box" });
    expect(settingsChanges(settings, { ...form, worker_name: "studio " }).update).toEqual({});
    expect(settingsChanges(settings, { ...form, worker_port: "0" }).update).toEqual({ worker_port: 0 });
    expect(settingsChanges(settings, { ...form, discovery_timeout_s: "2.5" }).update).toEqual({
      discovery_timeout_s: 2.5,
    });
    expect(settingsChanges(settings, { ...form, discovery_timeout_s: "3.0" }).update).toEqual({});
    expect(settingsChanges(settings, { ...form, key: "k", worker_port: "7001", mdns_interfaces: "lo" }).update).toEqual(
      { key: "k", worker_port: 7001, mdns_interfaces: ["lo"] },
    );
  });

  it("compares interfaces as lists", () => {
    expect(settingsChanges(settings, { ...form, mdns_interfaces: " eth0 , " }).update).toEqual({});
    expect(settingsChanges(settings, { ...form, mdns_interfaces: "" }).update).toEqual({ mdns_interfaces: [] });
    expect(settingsChanges(settings, { ...form, mdns_interfaces: "eth0, wlan0" }).update).toEqual({
      mdns_interfaces: ["eth0", "wlan0"],
    });
    expect(parseInterfaces("eth0,, wlan0 ,")).toEqual(["eth0", "wlan0"]);
    expect(parseInterfaces("")).toEqual([]);
  });

  it("sends worker addresses as a list and refuses what is not host:port", () => {
    expect(settingsChanges(settings, { ...form, worker_addresses: " 10.0.0.5:10128 \n" }).update).toEqual({});
    expect(
      settingsChanges(settings, { ...form, worker_addresses: "10.0.0.5:10128\nkitchen.local:9000, 10.0.0.5:10128" })
        .update,
    ).toEqual({ worker_addresses: ["10.0.0.5:10128", "kitchen.local:9000"] });
    expect(settingsChanges(settings, { ...form, worker_addresses: "" }).update).toEqual({ worker_addresses: [] });
    expect(parseWorkerAddresses("a:1,,b:2\n a:1")).toEqual(["a:1", "b:2"]);
    for (const bad of ["kitchen", "kitchen:", ":10128", "kitchen:0", "kitchen:70000", "kitchen:port"]) {
      const changes = settingsChanges(settings, { ...form, worker_addresses: bad, worker_name: "x" });
      expect(changes.problem).toContain(`"${bad}" is not a worker address`);
      expect(changes.update).toEqual({ worker_name: "x" });
    }
    expect(isWorkerAddress("[::1]:10128")).toBe(true);
  });

  it("refuses numbers out of range and leaves them out of the update", () => {
    for (const port of ["", "-1", "65536", "7.5", "abc"]) {
      const changes = settingsChanges(settings, { ...form, worker_port: port, worker_name: "x" });
      expect(changes.problem).toMatch(/port/);
      expect(changes.update).toEqual({ worker_name: "x" });
    }
    for (const seconds of ["", "-1", "61", "soon"]) {
      const changes = settingsChanges(settings, { ...form, discovery_timeout_s: seconds });
      expect(changes.problem).toMatch(/discovery/);
      expect(changes.update).toEqual({});
    }
    expect(settingsChanges(settings, { ...form, discovery_timeout_s: "60" }).problem).toBeNull();
  });

  it("sends a context length, empty for the model's own, and refuses one out of range", () => {
    expect(settingsChanges(settings, { ...form, context_length: " 4096 " }).update).toEqual({ context_length: 4096 });
    expect(settingsChanges(settings, { ...form, context_length: "0" }).update).toEqual({});
    const chosen = { ...settings, context_length: 4096 };
    expect(formFromSettings(chosen).context_length).toBe("4096");
    expect(settingsChanges(chosen, { ...form, context_length: "" }).update).toEqual({ context_length: 0 });
    for (const tokens of ["63", "2000000", "512.5", "many", "-4"]) {
      const changes = settingsChanges(settings, { ...form, context_length: tokens });
      expect(changes.problem).toMatch(/context length/);
      expect(changes.update).toEqual({});
    }
  });
});

describe("cluster texts", () => {
  it("describes the key without showing it", () => {
    const settings = clusterStatus({
      settings: { key_set: true, cluster_id: "ab23cd45", key_storage: "file" },
    }).settings;
    expect(keyDescription(settings)).toBe("Key set · cluster ab23cd45 (stored in file)");
    expect(keyDescription({ ...settings, key_storage: "keyring" })).toBe(
      "Key set · cluster ab23cd45 (stored in keyring)",
    );
    expect(keyDescription({ ...settings, key_storage: null, from_command_line: true })).toBe(
      "Key set · cluster ab23cd45 (from the command line)",
    );
    expect(keyDescription({ ...settings, cluster_id: null })).toBe("Key set · typed key (stored in file)");
    expect(keyDescription(clusterStatus().settings)).toBeNull();
  });

  it("says what this machine is", () => {
    expect(roleText(clusterStatus())).toBe("Not in a cluster");
    expect(roleText(clusterStatus({ role: "master" }))).toBe("Master: models you load use the workers below");
    const worker = (reachable_at: string[]) =>
      roleText(clusterStatus({ role: "worker", worker: { address: "0.0.0.0:7000", reachable_at, masters: [] } }));
    expect(worker(["192.168.1.20:7000", "10.0.0.5:7000"])).toBe("Worker: serving at 192.168.1.20:7000, 10.0.0.5:7000");
    expect(worker([])).toBe("Worker: serving on port 7000 (no network address found: is this machine on a network?)");
  });

  it("formats memory, shares and transfers", () => {
    expect(formatGigabytes(17_179_869_184)).toBe("17.2 GB");
    expect(formatShare(0.456)).toBe("46%");
    expect(formatShare(1.2)).toBe("100%");
    expect(transferFraction(5, 10)).toBe(0.5);
    expect(transferFraction(0, 0)).toBeNull();
    expect(formatSecondsPerToken(0.0114)).toBe("11 ms/token");
    expect(formatSecondsPerToken(0.0042)).toBe("4.2 ms/token");
    expect(formatSecondsPerToken(1.5)).toBe("1.50 s/token");
    expect(formatSecondsPerToken(0)).toBe("—");
  });
});
