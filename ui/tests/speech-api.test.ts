// Tests for the typed speech wrappers over the browser transport (a fake
// fetch): command names, argument shapes, and the `speak` stream.

import { afterEach, describe, expect, it, vi } from "vitest";
import { api } from "../src/api/commands";
import type { SpeakUpdate } from "../src/api/types";
import { isAbortError } from "../src/transport";
import { clip, voice } from "./fake-api";

function sse(events: object[], hang = false, signal?: AbortSignal): Response {
  const encoder = new TextEncoder();
  const body = new ReadableStream<Uint8Array>({
    async start(controller) {
      signal?.addEventListener("abort", () => controller.error(new DOMException("aborted", "AbortError")));
      for (const event of events) controller.enqueue(encoder.encode(`data: ${JSON.stringify(event)}\n\n`));
      if (hang) await new Promise(() => {});
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

const bodyOf = (fetchMock: ReturnType<typeof mockFetch>, call = 0) =>
  JSON.parse(fetchMock.mock.calls[call][1].body as string) as Record<string, unknown>;

afterEach(() => vi.unstubAllGlobals());

describe("speech commands", () => {
  it("call the documented commands with the documented args", async () => {
    const fetchMock = mockFetch((url) => {
      if (url.endsWith("list_voices")) return Response.json({ voices: [voice("v1")] });
      if (url.endsWith("add_voice")) return Response.json(voice("v2"));
      if (url.endsWith("list_clips")) return Response.json({ clips: [clip("c1")] });
      if (url.endsWith("_audio")) return Response.json({ wav_base64: "UklGRg==" });
      return Response.json({});
    });
    expect((await api.listVoices()).voices[0].id).toBe("v1");
    expect((await api.addVoice({ name: "Alice", file_base64: "AAAA", file_name: "Alice.wav" })).id).toBe("v2");
    await api.addVoice({ name: "Bob", path: "/rec/bob.wav" });
    await api.addVoice({ name: "Carter", wav_base64: "AAAA" }); // the older form
    await api.deleteVoice("v1");
    expect(await api.voiceAudio("v1")).toEqual({ wav_base64: "UklGRg==" });
    expect((await api.listClips()).clips[0].id).toBe("c1");
    await api.clipAudio("c1");
    await api.deleteClip("c1");

    const calls = fetchMock.mock.calls.map(([url], i) => [url, bodyOf(fetchMock, i)]);
    expect(calls).toEqual([
      ["/app/list_voices", {}],
      ["/app/add_voice", { name: "Alice", file_base64: "AAAA", file_name: "Alice.wav" }],
      ["/app/add_voice", { name: "Bob", path: "/rec/bob.wav" }],
      ["/app/add_voice", { name: "Carter", wav_base64: "AAAA" }],
      ["/app/delete_voice", { id: "v1" }],
      ["/app/voice_audio", { id: "v1" }],
      ["/app/list_clips", {}],
      ["/app/clip_audio", { id: "c1" }],
      ["/app/delete_clip", { id: "c1" }],
    ]);
  });

  it("reject with the backend's message for a bad file", async () => {
    mockFetch(() =>
      Response.json(
        {
          error: {
            message: "notes.txt is neither a WAV file nor a voice preset",
            type: "invalid_request_error",
            code: null,
          },
        },
        { status: 400 },
      ),
    );
    await expect(api.addVoice({ name: "notes", file_base64: "aGk=", file_name: "notes.txt" })).rejects.toThrow(
      "notes.txt is neither a WAV file nor a voice preset",
    );
  });
});

describe("speak", () => {
  const request = { model_id: "vv", script: "Speaker 1: Hi.", voice_ids: ["v1"], cfg_scale: 1.3, steps: 10 };

  it("reports loading, progress and audio in order, and resolves with the clip", async () => {
    const made = clip("c9");
    const updates: SpeakUpdate[] = [
      { type: "loading", fraction: 0.25, message: "Reading weights" },
      { type: "progress", frames: 3, seconds: 0.4, piece: 1, pieces: 2 },
      { type: "audio", pcm16_base64: "AAD/fw==", sample_rate: 24000 },
      { type: "progress", frames: 4, seconds: 0.53, piece: 2, pieces: 2 },
      { type: "audio", pcm16_base64: "AIA=", sample_rate: 24000 },
    ];
    const fetchMock = mockFetch(() => sse([...updates, { type: "done", clip: made }]));
    const events: SpeakUpdate[] = [];
    await expect(api.speak(request, (event) => events.push(event))).resolves.toEqual(made);
    expect(events).toEqual(updates);
    expect(fetchMock.mock.calls[0][0]).toBe("/app/speak");
    const { stream_id, ...args } = bodyOf(fetchMock);
    expect(typeof stream_id).toBe("string");
    expect(args).toEqual(request);
  });

  it("rejects with an error event's message", async () => {
    mockFetch(() => sse([{ type: "error", message: "the script has 5 speakers; at most 4 are supported" }]));
    await expect(api.speak(request, () => {})).rejects.toThrow(/at most 4/);
  });

  it("stops when aborted", async () => {
    const controller = new AbortController();
    mockFetch((_, init) => sse([{ type: "progress", frames: 1, seconds: 0.13 }], true, init.signal ?? undefined));
    const pending = api.speak(request, () => controller.abort(), controller.signal);
    expect(isAbortError(await pending.catch((error: unknown) => error))).toBe(true);
  });
});
