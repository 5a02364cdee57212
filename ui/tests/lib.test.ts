// Tests for the small pure helpers: number formatting, ids, conversations.

import { describe, expect, it } from "vitest";
import type { ModelEntry } from "../src/api/types";
import {
  formatBytes,
  formatDuration,
  formatParameters,
  formatSeconds,
  formatSpeed,
  formatTokensPerSecond,
  modelOptionLabel,
  stopNote,
} from "../src/lib/format";
import { randomId } from "../src/lib/ids";
import { describeGpuChoice, describePlacement, describeStageGpu } from "../src/lib/gpu";
import { exportFileName, exportText } from "../src/lib/export";
import {
  DEFAULT_SAMPLING,
  displayTitle,
  newConversation,
  normalizeConversation,
  requestMessages,
  samplingFor,
  titleFrom,
} from "../src/lib/conversation";
import { model } from "./fake-api";
import { explainFailure, HUB_UNREACHABLE_MESSAGE } from "../src/lib/errors";
import { CommandError, toError } from "../src/transport/events";

describe("failures in plain words", () => {
  it("reads the backend's error code, from an HTTP body or the desktop's", () => {
    const body = {
      error: { message: "cannot reach the hub at https://huggingface.co: Dns Failed", code: "hub_unreachable" },
    };
    const error = toError(body);
    expect(error).toBeInstanceOf(CommandError);
    expect(explainFailure(error)).toEqual({
      message: HUB_UNREACHABLE_MESSAGE,
      detail: "cannot reach the hub at https://huggingface.co: Dns Failed",
      action: "import-model",
    });
  });

  it("names hosts instead of whole URLs, cuts long messages, and keeps the whole text as detail", () => {
    const raw = "the hub answered HTTP 500 for https://example.org/api/models?search=cake&limit=30";
    expect(explainFailure(new Error(raw))).toEqual({
      message: "the hub answered HTTP 500 for example.org",
      detail: raw,
    });
    const long = `${"word ".repeat(80)}end`;
    const explained = explainFailure(new Error(long));
    expect(explained.message.length).toBeLessThanOrEqual(241);
    expect(explained.message.endsWith("…")).toBe(true);
    expect(explained.detail).toBe(long);
    expect(explainFailure(new Error("plain words"))).toEqual({ message: "plain words" });
  });
});

describe("format", () => {
  it("names a model in a picker with each fact once", () => {
    const model = { id: "default", name: "SmolLM2 135M Instruct", source: "default" } as ModelEntry;
    expect(modelOptionLabel(model, "default")).toBe("SmolLM2 135M Instruct (default, loaded)");
    expect(modelOptionLabel(model, null)).toBe("SmolLM2 135M Instruct (default)");
    const other = { ...model, id: "hf:a/b", name: "b", source: "hf-cache" } as ModelEntry;
    expect(modelOptionLabel(other, "default")).toBe("b");
    expect(modelOptionLabel(other, "hf:a/b")).toBe("b (loaded)");
  });

  it("says why a reply stopped, in the engine's own terms", () => {
    expect(stopNote("max_tokens")).toBe("stopped at the token limit");
    expect(stopNote("context_full")).toContain("context");
    expect(stopNote("cancelled")).toBe("stopped by you");
    expect(stopNote("eos")).toBeNull();
    expect(stopNote("stop_string")).toBeNull();
  });

  it("writes parameter counts like model cards do", () => {
    expect(formatParameters(134_515_008)).toBe("135M");
    expect(formatParameters(1_543_714_304)).toBe("1.5B");
    expect(formatParameters(7_000_000_000)).toBe("7B");
    expect(formatParameters(494_032_768)).toBe("494M");
    expect(formatParameters(12_345)).toBe("12.3K");
    expect(formatParameters(999)).toBe("999");
    expect(formatParameters(null)).toBe("—");
  });

  it("writes sizes, speeds and durations", () => {
    expect(formatBytes(270_000_000)).toBe("270 MB");
    expect(formatBytes(1_234_000_000)).toBe("1.2 GB");
    expect(formatBytes(512)).toBe("512 B");
    expect(formatSpeed(12_500_000)).toBe("12.5 MB/s");
    expect(formatDuration(42)).toBe("42 s");
    expect(formatDuration(192)).toBe("3 min 12 s");
    expect(formatDuration(3900)).toBe("1 h 5 min");
    expect(formatDuration(Number.POSITIVE_INFINITY)).toBe("—");
    expect(formatSeconds(0.0421)).toBe("0.04 s");
    expect(formatTokensPerSecond(35.14)).toBe("35.1 tok/s");
  });
});

describe("ids", () => {
  it("uses only [A-Za-z0-9_-] and does not repeat", () => {
    const ids = new Set(Array.from({ length: 500 }, () => randomId()));
    expect(ids.size).toBe(500);
    for (const id of ids) expect(id).toMatch(/^[A-Za-z0-9_-]{16}$/);
  });
});

describe("conversation helpers", () => {
  it("titles from the first user message, about 40 characters", () => {
    expect(titleFrom("  Hello\n  world  ")).toBe("Hello world");
    const long = titleFrom("Explain the difference between quantization formats in detail");
    expect(long.length).toBeLessThanOrEqual(41);
    expect(long.endsWith("…")).toBe(true);
    expect(titleFrom("x".repeat(60))).toBe(`${"x".repeat(40)}…`);
  });

  it("shows a placeholder title for an empty conversation", () => {
    const conversation = newConversation(null);
    expect(displayTitle(conversation)).toBe("New conversation");
    expect(displayTitle({ ...conversation, messages: [{ role: "user", content: "Hi there" }] })).toBe("Hi there");
  });

  it("builds the chat request messages with the system prompt first and no stats", () => {
    const conversation = {
      ...newConversation("m"),
      system_prompt: "Be kind.",
      messages: [
        { role: "user" as const, content: "hi" },
        {
          role: "assistant" as const,
          content: "hello",
          stats: { prompt_tokens: 1, completion_tokens: 1, ttft_s: 0, decode_tok_s: 0, finish_reason: "eos" as const },
        },
      ],
    };
    expect(requestMessages(conversation)).toEqual([
      { role: "system", content: "Be kind." },
      { role: "user", content: "hi" },
      { role: "assistant", content: "hello" },
    ]);
    expect(requestMessages({ ...conversation, system_prompt: "  " })).toHaveLength(2);
  });

  it("fills in fields a stored conversation lacks", () => {
    const restored = normalizeConversation({
      id: "a1",
      updated_at: "2026-01-01T00:00:00Z",
      sampling: { temperature: 0 } as never,
    });
    expect(restored).toEqual({
      id: "a1",
      title: "",
      title_set: false,
      model_id: null,
      system_prompt: "",
      sampling: { ...DEFAULT_SAMPLING, temperature: 0 },
      messages: [],
      created_at: "2026-01-01T00:00:00Z",
      updated_at: "2026-01-01T00:00:00Z",
    });
  });
});

describe("export", () => {
  const conversation = {
    ...newConversation("hf:org/model", new Date("2026-12-01T10:00:00Z")),
    title: 'Bread: "rye" / wheat?',
    title_set: true,
    system_prompt: "Be brief.",
    messages: [
      { role: "user" as const, content: "Rye or wheat?" },
      { role: "assistant" as const, content: "Rye, **always**.", stopped: true },
      { role: "user" as const, content: "", pictures: ["a".repeat(64), "b".repeat(64)] },
    ],
  };

  it("writes Markdown with the title, settings and every turn", () => {
    expect(exportText(conversation, "markdown")).toBe(
      [
        '# Bread: "rye" / wheat?',
        "",
        "_Model: hf:org/model · Last changed 2026-12-01T10:00:00.000Z_",
        "",
        "## System prompt",
        "",
        "Be brief.",
        "",
        "## You",
        "",
        "Rye or wheat?",
        "",
        "## Assistant",
        "",
        "Rye, **always**.",
        "",
        "_(stopped by you)_",
        "",
        "## You",
        "",
        "_(2 pictures)_",
        "",
      ].join("\n"),
    );
  });

  it("writes JSON that reads back as the same conversation", () => {
    expect(JSON.parse(exportText(conversation, "json"))).toEqual(conversation);
  });

  it("names the file after the title without characters file systems refuse", () => {
    expect(exportFileName(conversation, "markdown")).toBe("Bread rye wheat.md");
    expect(exportFileName({ ...conversation, title: "///", title_set: true }, "json")).toBe("conversation.json");
  });
});

describe("samplingFor", () => {
  const recommending = model("m1", { sampling_defaults: { temperature: 0.6, top_p: 0.95, top_k: null } });

  it("starts a conversation on the model's recommended sampling", () => {
    const starting = { ...newConversation("m1"), messages: [{ role: "user" as const, content: "hi" }] };
    expect(samplingFor(starting, recommending)).toEqual({ ...DEFAULT_SAMPLING, temperature: 0.6, top_p: 0.95 });
    expect(samplingFor(starting, model("m2"))).toEqual(DEFAULT_SAMPLING);
  });

  it("keeps settings the person chose, and a conversation under way", () => {
    const chosen = {
      ...newConversation("m1"),
      sampling: { ...DEFAULT_SAMPLING, repeat_penalty: 1.3 },
      messages: [{ role: "user" as const, content: "hi" }],
    };
    expect(samplingFor(chosen, recommending)).toEqual(chosen.sampling);
    const underWay = {
      ...newConversation("m1"),
      messages: [
        { role: "user" as const, content: "hi" },
        { role: "assistant" as const, content: "hello" },
        { role: "user" as const, content: "more" },
      ],
    };
    expect(samplingFor(underWay, recommending)).toEqual(DEFAULT_SAMPLING);
  });
});

describe("GPU texts", () => {
  it("shows the GPU's layers as ranges, or why the CPU runs them", () => {
    const placement = { device: "llvmpipe (Vulkan, software)", layers: [0, 1, 2, 5], weight_bytes: 1, cpu_reasons: [] };
    expect(describePlacement(placement)).toBe("Layers 0–2, 5 on the GPU: llvmpipe (Vulkan, software)");
    expect(describePlacement({ ...placement, layers: [3] })).toBe("Layer 3 on the GPU: llvmpipe (Vulkan, software)");
    const none = { device: null, layers: [], weight_bytes: 0, cpu_reasons: ["no GPU: no GPU driver found"] };
    expect(describePlacement(none)).toBe("CPU only: no GPU: no GPU driver found");
    expect(describePlacement({ ...none, cpu_reasons: [] })).toBeNull();
    expect(describePlacement(null)).toBeNull();
  });

  it("says what each GPU setting would use", () => {
    const found = {
      auto: { device: null, unavailable: "the only GPU driver, llvmpipe, computes on the CPU" },
      on: { device: "llvmpipe (Vulkan, software)", unavailable: null },
    };
    expect(describeGpuChoice("off", found)).toBe("Models run on the CPU.");
    expect(describeGpuChoice("on", found)).toBe("Uses llvmpipe (Vulkan, software).");
    expect(describeGpuChoice("auto", found)).toContain("No GPU to use (the only GPU driver");
  });

  it("names the layers a plan puts on a machine's GPU", () => {
    expect(describeStageGpu({ gpu_layers: [1, 2, 3, 5], gpu_memory_bytes: 1.5e9 })).toBe(
      "layers 1–3, 5 on its GPU (1.5 GB)",
    );
    expect(describeStageGpu({ gpu_layers: [4], gpu_memory_bytes: 2e6 })).toBe("layer 4 on its GPU (2 MB)");
    expect(describeStageGpu({ gpu_layers: [], gpu_memory_bytes: 0 })).toBeNull();
    expect(describeStageGpu({})).toBeNull();
  });
});
