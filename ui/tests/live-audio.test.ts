// Tests for the live player of speech against a fake AudioContext whose
// clock the test moves: chunks queued back to back (or a moment after now
// when playback caught up, after a refill that grows at each stop), the seconds heard, playing out after the
// stream ends, stopping at once, and never sounding with the clip player.

import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { LiveAudio, type LiveContext } from "../src/components/live-audio";
import { player } from "../src/components/playback";

/** A source node that remembers when it was started and whether it was stopped. */
class FakeSource {
  buffer: { duration: number } | null = null;
  when: number | null = null;
  stopped = false;
  connect() {}
  disconnect() {}
  start(when: number) {
    this.when = when;
  }
  stop() {
    this.stopped = true;
  }
}

class FakeContext {
  currentTime = 0;
  state: AudioContextState = "suspended";
  destination = {};
  sources: FakeSource[] = [];
  resume = vi.fn(async () => {
    this.state = "running";
  });
  createBuffer(_channels: number, length: number, sampleRate: number) {
    return { duration: length / sampleRate, copyToChannel: vi.fn() };
  }
  createBufferSource() {
    const source = new FakeSource();
    this.sources.push(source);
    return source;
  }
}

/** `seconds` of silence at 24 kHz. */
const chunk = (seconds: number) => new Float32Array(Math.round(seconds * 24000));

function setup() {
  const context = new FakeContext();
  const live = new LiveAudio(() => context as unknown as LiveContext);
  /** Move the context's clock and let the live player look at it. */
  const at = (seconds: number) => {
    context.currentTime = seconds;
    vi.advanceTimersByTime(200);
  };
  return { context, live, at, state: () => live.store.get() };
}

beforeEach(() => vi.useFakeTimers());
afterEach(() => {
  vi.useRealTimers();
  player.stop();
});

describe("live audio", () => {
  it("resumes the context in begin (the Generate click)", () => {
    const { context, live } = setup();
    live.begin();
    expect(context.resume).toHaveBeenCalledTimes(1);
    live.begin();
    expect(context.resume).toHaveBeenCalledTimes(1); // running by then: one context, resumed once
  });

  it("queues each chunk right after the previous one, and a moment after now once it caught up", () => {
    const { context, live, state } = setup();
    live.begin();
    context.currentTime = 1;
    live.play(chunk(0.5), 24000);
    live.play(chunk(0.25), 24000);
    expect(context.sources.map((s) => s.when)).toEqual([1.1, 1.6]);
    expect(state().playing).toBe(true);

    context.currentTime = 3; // the queue ran dry at 1.85
    live.play(chunk(0.5), 24000);
    expect(context.sources[2].when).toBeCloseTo(3.1);
  });

  it("holds audio back after the queue runs dry, a longer refill each time, so pauses are few", () => {
    const { context, live, state } = setup();
    live.begin();
    live.play(chunk(0.2), 24000); // 0.1 … 0.3
    context.currentTime = 0.5; // ran dry: hold until half a second has come
    live.play(chunk(0.2), 24000);
    expect(context.sources).toHaveLength(1);
    expect(state().buffering).toBe(true);
    context.currentTime = 0.8;
    live.play(chunk(0.2), 24000);
    expect(context.sources).toHaveLength(1);
    live.play(chunk(0.2), 24000); // 0.6 s held: all three play from now, back to back
    expect(context.sources.map((s) => s.when)).toEqual([0.1, 0.9, 1.1, 1.3].map((t) => expect.closeTo(t)));
    expect(state().buffering).toBe(false);
    live.play(chunk(0.2), 24000); // while it plays: straight after the others
    expect(context.sources[4].when).toBeCloseTo(1.5);

    context.currentTime = 3; // dry again: this time a second is held
    for (let i = 0; i < 4; i++) live.play(chunk(0.2), 24000);
    expect(context.sources).toHaveLength(5);
    live.play(chunk(0.2), 24000);
    expect(context.sources).toHaveLength(10);
    expect(context.sources[5].when).toBeCloseTo(3.1);
  });

  it("plays what it held at once when the stream ends", () => {
    const { context, live, state } = setup();
    live.begin();
    live.play(chunk(0.2), 24000);
    context.currentTime = 1;
    live.play(chunk(0.1), 24000);
    expect(context.sources).toHaveLength(1);
    live.finish();
    expect(context.sources.map((s) => s.when)).toEqual([0.1, 1.1].map((t) => expect.closeTo(t)));
    expect(state().buffering).toBe(false);
  });

  it("counts the seconds heard by the context's clock, leaving out the gaps", () => {
    const { context, live, at, state } = setup();
    live.begin();
    live.play(chunk(0.5), 24000); // 0.1 … 0.6
    at(0.05);
    expect(state().playedSeconds).toBe(0);
    at(0.35);
    expect(state().playedSeconds).toBeCloseTo(0.25);
    at(2);
    expect(state().playedSeconds).toBeCloseTo(0.5);
    expect(state().playing).toBe(true); // more may come
    live.play(chunk(0.5), 24000); // 2.1 … 2.6
    expect(context.sources[1].when).toBeCloseTo(2.1);
    at(2.3);
    expect(state().playedSeconds).toBeCloseTo(0.7);
  });

  it("plays out what is queued when the stream ends, then is done", () => {
    const { context, live, at, state } = setup();
    live.begin();
    live.play(chunk(1), 24000); // 0.1 … 1.1
    live.finish();
    at(0.6);
    expect(state()).toEqual({ playing: true, playedSeconds: expect.closeTo(0.5), buffering: false });
    expect(context.sources[0].stopped).toBe(false);
    at(1.2);
    expect(state()).toEqual({ playing: false, playedSeconds: 0, buffering: false });
  });

  it("is done at once when the stream ends without audio", () => {
    const { live, state } = setup();
    live.begin();
    live.finish();
    expect(state().playing).toBe(false);
  });

  it("stops at once, and ignores chunks until the next begin", () => {
    const { context, live, at, state } = setup();
    live.begin();
    live.play(chunk(1), 24000);
    live.play(chunk(1), 24000);
    at(0.5);
    live.stop();
    expect(context.sources.map((s) => s.stopped)).toEqual([true, true]);
    expect(state()).toEqual({ playing: false, playedSeconds: 0, buffering: false });

    live.play(chunk(1), 24000);
    expect(context.sources).toHaveLength(2);
    live.begin();
    live.play(chunk(1), 24000);
    expect(context.sources).toHaveLength(3);
  });

  it("never sounds with the clip player: Generate stops a clip, playing a clip stops live audio", () => {
    const { context, live } = setup();
    player.store.update({ key: "clip:c1", playing: true });
    live.begin();
    expect(player.store.get().key).toBeNull();

    live.play(chunk(1), 24000);
    player.store.update({ key: "voice:v1", loading: true }); // as `player.toggle` starts one
    expect(context.sources[0].stopped).toBe(true);
    expect(live.store.get().playing).toBe(false);
  });

  it("plays nothing, and fails nothing, without Web Audio", () => {
    const live = new LiveAudio(() => null);
    live.begin();
    live.play(chunk(1), 24000);
    live.finish();
    expect(live.store.get().playing).toBe(false);
  });
});
