// Speech heard while it is made: the audio chunks of a `speak` stream are
// queued one right after another on one Web Audio AudioContext, created or
// resumed within the Generate click (autoplay rules). When the chunks come
// slower than they play and the queue runs dry, the next ones are held until
// a refill of audio has come (half a second, doubling at each stop up to
// four), so a slow machine pauses a few times, longer each time, instead of
// after every frame. What has been heard is counted by the context's clock. Live audio and the player of
// stored voices and clips (playback.ts) never sound together: starting one
// stops the other. Without Web Audio nothing plays and the rest works.

import type { LiveSpeech } from "../state/speech";
import { Store } from "../state/store";
import { player } from "./playback";
import { useStore } from "./useStore";

export interface LivePlaybackState {
  /** A stream's audio is playing or queued (also while the next chunk is awaited). */
  playing: boolean;
  /** Seconds heard so far. */
  playedSeconds: number;
  /** Playback ran dry and waits for a refill of audio. */
  buffering: boolean;
}

const IDLE: LivePlaybackState = { playing: false, playedSeconds: 0, buffering: false };

/** How far after now a chunk starts when playback has caught up with the stream. */
const LEAD_SECONDS = 0.1;
/** Audio held back after the first time the queue runs dry; doubles at each later time. */
const FIRST_REFILL_SECONDS = 0.5;
const MAX_REFILL_SECONDS = 4;
/** How often the seconds heard are updated. */
const TICK_MS = 200;

/** The part of an AudioContext used here (tests pass a fake). */
export type LiveContext = Pick<
  AudioContext,
  "currentTime" | "state" | "destination" | "resume" | "createBuffer" | "createBufferSource"
>;

/** A chunk on the context's timeline. */
interface Queued {
  source: AudioBufferSourceNode;
  start: number;
  end: number;
}

export class LiveAudio implements LiveSpeech {
  readonly store = new Store<LivePlaybackState>(IDLE);
  private context: LiveContext | null = null;
  /** Between `begin` and `stop`: chunks are played. */
  private open = false;
  /** No more chunks come: the session ends when the queue has played. */
  private finished = false;
  /** Chunks not yet over, in order. */
  private queue: Queued[] = [];
  /** When the last chunk queued ends. */
  private end = -Infinity;
  /** Seconds of the chunks already over. */
  private heard = 0;
  /** Chunks held back while the queue refills, and their seconds. */
  private held: { samples: Float32Array<ArrayBuffer>; sampleRate: number }[] = [];
  private heldSeconds = 0;
  /** How much to hold back the next time the queue runs dry. */
  private refill = FIRST_REFILL_SECONDS;
  private ticker: ReturnType<typeof setInterval> | null = null;

  constructor(private readonly createContext: () => LiveContext | null = webAudioContext) {
    player.store.subscribe(() => {
      if (player.store.get().key !== null) this.stop(); // a voice or clip is played
    });
  }

  prime(): void {
    this.context ??= this.createContext();
    if (this.context?.state === "suspended") this.context.resume().catch(() => {}); // then nothing is heard
  }

  begin(): void {
    this.stop();
    player.stop();
    this.prime();
    if (this.context === null) return;
    this.open = true;
  }

  play(samples: Float32Array<ArrayBuffer>, sampleRate: number): void {
    const context = this.context;
    if (!this.open || context === null || samples.length === 0) return;
    const ranDry = this.end !== -Infinity && this.end < context.currentTime;
    if (ranDry || this.held.length > 0) {
      this.held.push({ samples, sampleRate });
      this.heldSeconds += samples.length / sampleRate;
      if (this.heldSeconds >= this.refill) {
        this.refill = Math.min(this.refill * 2, MAX_REFILL_SECONDS);
        this.release();
      } else if (!this.store.get().buffering) {
        this.store.update({ buffering: true });
      }
      return;
    }
    this.schedule(context, samples, sampleRate);
  }

  /** Queues the chunks held back. */
  private release(): void {
    const held = this.held;
    this.held = [];
    this.heldSeconds = 0;
    for (const { samples, sampleRate } of held) {
      if (this.context !== null) this.schedule(this.context, samples, sampleRate);
    }
    if (this.store.get().buffering) this.store.update({ buffering: false });
  }

  private schedule(context: LiveContext, samples: Float32Array<ArrayBuffer>, sampleRate: number): void {
    const buffer = context.createBuffer(1, samples.length, sampleRate);
    buffer.copyToChannel(samples, 0);
    const source = context.createBufferSource();
    source.buffer = buffer;
    source.connect(context.destination);
    const now = context.currentTime;
    const start = this.end >= now ? this.end : now + LEAD_SECONDS;
    source.start(start);
    this.end = start + samples.length / sampleRate;
    this.queue.push({ source, start, end: this.end });
    if (this.ticker === null) {
      this.ticker = setInterval(() => this.tick(), TICK_MS);
      this.store.update({ playing: true, playedSeconds: 0 });
    }
  }

  finish(): void {
    if (this.held.length > 0) this.release(); // nothing more comes: no reason to wait
    this.finished = true;
    if (this.ticker === null) this.stop(); // nothing was queued
  }

  stop(): void {
    for (const { source } of this.queue) {
      source.stop();
      source.disconnect();
    }
    this.queue = [];
    this.end = -Infinity;
    this.heard = 0;
    this.held = [];
    this.heldSeconds = 0;
    this.refill = FIRST_REFILL_SECONDS;
    this.open = false;
    this.finished = false;
    if (this.ticker !== null) clearInterval(this.ticker);
    this.ticker = null;
    if (this.store.get().playing) this.store.update(IDLE);
  }

  private tick(): void {
    const now = this.context?.currentTime ?? 0;
    while (this.queue.length > 0 && this.queue[0].end <= now) {
      const over = this.queue.shift()!;
      this.heard += over.end - over.start;
    }
    if (this.finished && this.queue.length === 0) {
      this.stop(); // played to its end
      return;
    }
    const current = this.queue[0];
    const playing = current !== undefined && now > current.start ? now - current.start : 0;
    this.store.update({ playedSeconds: this.heard + playing });
  }
}

/** A new AudioContext, or null where there is no Web Audio (or no audio device). */
function webAudioContext(): LiveContext | null {
  if (typeof AudioContext === "undefined") return null;
  try {
    return new AudioContext();
  } catch {
    return null;
  }
}

export const liveAudio = new LiveAudio();

/** The live player's state; re-renders the component when it changes. */
export function useLivePlayback(): LivePlaybackState {
  return useStore(liveAudio.store);
}
