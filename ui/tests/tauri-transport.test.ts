// Tests for the desktop transport with `@tauri-apps/api/core` replaced by a
// fake: commands go through `app_call` / `app_stream`, events arrive on the
// Channel, and a stop calls `cancel_stream`.

import { beforeEach, describe, expect, it, vi } from "vitest";

type Handler = (message: unknown) => void;
interface IpcArgs {
  command: string;
  args: Record<string, unknown>;
  events?: { onmessage: Handler };
}
type Invoke = (ipc: string, payload: IpcArgs) => Promise<unknown>;

const fake = vi.hoisted(() => ({
  invoke: null as unknown as import("vitest").Mock<Invoke>,
}));

vi.mock("@tauri-apps/api/core", () => {
  class Channel {
    onmessage: Handler = () => {};
  }
  return { Channel, invoke: (ipc: string, payload: IpcArgs) => fake.invoke(ipc, payload) };
});

import { openAiApi, setOpenAiApi, tauriCall, tauriStream } from "../src/transport/tauri";
import { isAbortError } from "../src/transport/events";

beforeEach(() => {
  fake.invoke = vi.fn<Invoke>();
});

describe("tauriCall", () => {
  it("sends the command and its args through app_call", async () => {
    fake.invoke.mockResolvedValue({ version: "1" });
    await expect(tauriCall("app_info", {})).resolves.toEqual({ version: "1" });
    expect(fake.invoke).toHaveBeenCalledWith("app_call", { command: "app_info", args: {} });
  });

  it("rejects with the backend's message", async () => {
    fake.invoke.mockRejectedValue("no such model");
    await expect(tauriCall("get_conversation", { id: "x" })).rejects.toThrow("no such model");
  });
});

describe("tauriStream", () => {
  it("passes a Channel as `events` beside the args and resolves with done", async () => {
    fake.invoke.mockImplementation(async (_ipc, { events }) => {
      events!.onmessage({ type: "token", text: "a" });
      events!.onmessage({ type: "done", stats: { n: 1 } });
    });
    const seen: unknown[] = [];
    const request = { stream_id: "s", model_id: "m" };
    const done = await tauriStream("chat", request, (e) => seen.push(e));
    expect(done).toEqual({ type: "done", stats: { n: 1 } });
    expect(seen).toHaveLength(2);
    const [ipc, payload] = fake.invoke.mock.calls[0];
    expect(ipc).toBe("app_stream");
    expect(payload).toMatchObject({ command: "chat", args: { stream_id: "s", model_id: "m" } });
    expect(payload.events).toBeDefined();
  });

  it("keeps listening after app_stream resolved at the start of the work", async () => {
    fake.invoke.mockImplementation(async (_ipc, { events }) => {
      setTimeout(() => events!.onmessage({ type: "progress", fraction: 0.5, message: "x" }), 10);
      setTimeout(() => events!.onmessage({ type: "done", model: { id: "x" } }), 30);
    });
    const seen: unknown[] = [];
    await expect(tauriStream("load_model", { stream_id: "s" }, (e) => seen.push(e))).resolves.toEqual({
      type: "done",
      model: { id: "x" },
    });
    expect(seen).toHaveLength(2);
  });

  it("rejects when the work cannot start", async () => {
    fake.invoke.mockRejectedValue("unknown model `x`");
    await expect(tauriStream("load_model", { stream_id: "s" }, () => {})).rejects.toThrow("unknown model `x`");
  });

  it("rejects with an error event's message", async () => {
    fake.invoke.mockImplementation(async (_ipc, { events }) => {
      events!.onmessage({ type: "error", message: "bad weights" });
    });
    await expect(tauriStream("load_model", { stream_id: "s" }, () => {})).rejects.toThrow("bad weights");
  });

  it("cancels with cancel_stream and rejects with an AbortError", async () => {
    const controller = new AbortController();
    fake.invoke.mockImplementation(async (_ipc, { command, events }) => {
      if (command === "cancel_stream") return {};
      events!.onmessage({ type: "token", text: "partial" });
      return null; // started; no more events until cancelled
    });
    const pending = tauriStream("chat", { stream_id: "s42" }, () => controller.abort(), controller.signal);
    const error = await pending.catch((e: unknown) => e);
    expect(isAbortError(error)).toBe(true);
    expect(fake.invoke).toHaveBeenCalledWith("app_call", { command: "cancel_stream", args: { stream_id: "s42" } });
  });
});

describe("the OpenAI API switch", () => {
  it("reads and sets it through its own commands, with the backend's reason on failure", async () => {
    const status = { enabled: false, port: 8080, base_url: null, api_key: null, error: null };
    fake.invoke.mockResolvedValue(status);
    await expect(openAiApi()).resolves.toEqual(status);
    expect(fake.invoke).toHaveBeenLastCalledWith("openai_api", undefined);
    fake.invoke.mockRejectedValue("cannot listen on 127.0.0.1:8080: Address in use");
    await expect(setOpenAiApi(true, 8080)).rejects.toThrow("Address in use");
    expect(fake.invoke).toHaveBeenLastCalledWith("set_openai_api", { enabled: true, port: 8080 });
  });
});
