// Tests for the browser transport: SSE parsing, error bodies, stream
// endings and aborting, with `fetch` replaced by a stand-in.

import { afterEach, describe, expect, it, vi } from "vitest";
import { SseParser } from "../src/transport/sse";
import { httpCall, httpStream } from "../src/transport/http";
import { StreamSink, isAbortError, toError } from "../src/transport/events";

describe("SseParser", () => {
  function parseChunks(chunks: string[]): string[] {
    const out: string[] = [];
    const parser = new SseParser((data) => out.push(data));
    chunks.forEach((chunk) => parser.feed(chunk));
    parser.end();
    return out;
  }

  it("splits events on blank lines", () => {
    expect(parseChunks(['data: {"a":1}\n\ndata: {"b":2}\n\n'])).toEqual(['{"a":1}', '{"b":2}']);
  });

  it("handles chunks split anywhere, CRLF, comments and other fields", () => {
    const body = ': keep-alive\r\nevent: message\r\nid: 7\r\ndata: {"text":"hé"}\r\n\r\ndata:{"x":2}\n\n';
    const everySplit = [...body].map((c) => c);
    expect(parseChunks(everySplit)).toEqual(['{"text":"hé"}', '{"x":2}']);
  });

  it("joins multi-line data and flushes a last event without its blank line", () => {
    expect(parseChunks(["data: a\ndata: b\n\ndata: tail"])).toEqual(["a\nb", "tail"]);
  });
});

describe("StreamSink", () => {
  it("passes events on and ends at done", () => {
    const seen: unknown[] = [];
    const sink = new StreamSink<{ type: string }>((e) => seen.push(e));
    sink.push({ type: "token", text: "a" });
    sink.push({ type: "done", stats: {} });
    sink.push({ type: "token", text: "late" });
    expect(seen).toEqual([
      { type: "token", text: "a" },
      { type: "done", stats: {} },
    ]);
    expect(sink.result()).toEqual({ type: "done", stats: {} });
  });

  it("turns an error event into a rejection with its message", () => {
    const sink = new StreamSink(() => {});
    sink.push({ type: "error", message: "out of memory" });
    expect(() => sink.result()).toThrow("out of memory");
  });

  it("complains when the stream ends without done", () => {
    const sink = new StreamSink(() => {});
    expect(() => sink.result()).toThrow(/closed before/);
  });
});

describe("toError", () => {
  it("reads strings, {message} and {error: {message}}", () => {
    expect(toError("plain").message).toBe("plain");
    expect(toError({ message: "direct" }).message).toBe("direct");
    expect(toError({ error: { message: "nested" } }).message).toBe("nested");
  });
});

// ---- HTTP transport with a fake fetch ----------------------------------------

function sseResponse(chunks: string[], signal?: AbortSignal): Response {
  const encoder = new TextEncoder();
  const body = new ReadableStream<Uint8Array>({
    async start(controller) {
      signal?.addEventListener("abort", () => controller.error(new DOMException("aborted", "AbortError")));
      for (const chunk of chunks) {
        if (chunk === "WAIT") {
          await new Promise(() => {}); // hang until aborted
        }
        controller.enqueue(encoder.encode(chunk));
      }
      controller.close();
    },
  });
  return new Response(body, { status: 200, headers: { "Content-Type": "text/event-stream" } });
}

function mockFetch(respond: (url: string, init: RequestInit) => Response) {
  const fetchMock = vi.fn(async (url: string, init: RequestInit) => respond(url, init));
  vi.stubGlobal("fetch", fetchMock);
  return fetchMock;
}

afterEach(() => vi.unstubAllGlobals());

describe("httpCall", () => {
  it("POSTs JSON to /app/<command> and parses the answer", async () => {
    const fetchMock = mockFetch(() => Response.json({ models: [], loaded: null }));
    await expect(httpCall("list_models", {})).resolves.toEqual({ models: [], loaded: null });
    const [url, init] = fetchMock.mock.calls[0];
    expect(url).toBe("/app/list_models");
    expect(init.method).toBe("POST");
    expect(init.body).toBe("{}");
  });

  it("throws the message of an OpenAI-shaped error body", async () => {
    mockFetch(() =>
      Response.json({ error: { message: "unknown model", type: "not_found_error", code: null } }, { status: 404 }),
    );
    await expect(httpCall("get_conversation", { id: "x" })).rejects.toThrow("unknown model");
  });

  it("falls back to the status for a non-JSON error", async () => {
    mockFetch(() => new Response("Bad Gateway", { status: 502 }));
    await expect(httpCall("app_info", {})).rejects.toThrow("HTTP 502: Bad Gateway");
  });
});

describe("httpStream", () => {
  it("delivers events and resolves with done", async () => {
    mockFetch(() =>
      sseResponse([
        'data: {"type":"token","text":"Hel"}\n\n',
        'data: {"type":"token","te',
        'xt":"lo"}\n\ndata: {"type":"done","stats":{"x":1}}\n\n',
      ]),
    );
    const tokens: string[] = [];
    const done = await httpStream<{ type: string; text?: string }>(
      "chat",
      { stream_id: "s1" },
      (e) => e.type === "token" && tokens.push(e.text!),
    );
    expect(tokens).toEqual(["Hel", "lo"]);
    expect(done).toEqual({ type: "done", stats: { x: 1 } });
  });

  it("rejects with the message of an error event", async () => {
    mockFetch(() =>
      sseResponse([
        'data: {"type":"progress","fraction":0.5,"message":"x"}\n\n',
        'data: {"type":"error","message":"disk full"}\n\n',
      ]),
    );
    await expect(httpStream("download_model", { repo_id: "a/b" }, () => {})).rejects.toThrow("disk full");
  });

  it("rejects when the connection closes before done", async () => {
    mockFetch(() => sseResponse(['data: {"type":"token","text":"a"}\n\n']));
    await expect(httpStream("chat", {}, () => {})).rejects.toThrow(/closed before/);
  });

  it("rejects with an AbortError when aborted mid-stream, after the events so far", async () => {
    const controller = new AbortController();
    mockFetch((_, init) =>
      sseResponse(['data: {"type":"token","text":"partial"}\n\n', "WAIT"], init.signal ?? undefined),
    );
    const seen: unknown[] = [];
    const pending = httpStream(
      "chat",
      {},
      (e) => {
        seen.push(e);
        controller.abort();
      },
      controller.signal,
    );
    const error = await pending.catch((e: unknown) => e);
    expect(isAbortError(error)).toBe(true);
    expect(seen).toEqual([{ type: "token", text: "partial" }]);
  });

  it("sends the body with the stream id", async () => {
    const fetchMock = mockFetch(() => sseResponse(['data: {"type":"done","model":{}}\n\n']));
    await httpStream("load_model", { id: "default", stream_id: "abc" }, () => {});
    expect(JSON.parse(fetchMock.mock.calls[0][1].body as string)).toEqual({ id: "default", stream_id: "abc" });
    expect(fetchMock.mock.calls[0][0]).toBe("/app/load_model");
  });
});
