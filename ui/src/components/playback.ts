// One audio player for the whole UI: playing a voice or clip stops whatever
// played before (also speech playing as it is made, see live-audio.ts). The
// WAV bytes become a Blob (audio/wav) behind an object URL for an <audio>
// element; the URL is revoked when playback ends or switches. Nothing here
// is needed for the rest of the UI to work: without an audio device
// `play()` fails and the caller reports it.

import { Store } from "../state/store";
import { useStore } from "./useStore";

export interface PlaybackState {
  /** What is playing or paused ("voice:<id>", "clip:<id>"), or null. */
  key: string | null;
  /** The audio is being fetched. */
  loading: boolean;
  playing: boolean;
  /** Seconds played, and the length once known (else 0). */
  position: number;
  duration: number;
}

const IDLE: PlaybackState = { key: null, loading: false, playing: false, position: 0, duration: 0 };

class Player {
  readonly store = new Store<PlaybackState>(IDLE);
  private audio: HTMLAudioElement | null = null;
  private url: string | null = null;
  private detach: (() => void) | null = null;

  /** Play `key` (its bytes from `load`), or pause / resume it if it is the current one. */
  async toggle(key: string, load: () => Promise<Uint8Array<ArrayBuffer>>): Promise<void> {
    const current = this.store.get();
    if (current.key === key) {
      if (current.loading) return;
      if (this.audio) {
        if (this.audio.paused) await this.audio.play();
        else this.audio.pause();
        return;
      }
    }
    this.stop();
    this.store.update({ ...IDLE, key, loading: true });
    try {
      const bytes = await load();
      if (this.store.get().key !== key) return; // something else was started meanwhile
      await this.start(bytes).play();
    } catch (error) {
      if (this.store.get().key === key) this.stop();
      throw error;
    }
  }

  /** Stop and forget the current audio (its object URL is revoked). */
  stop(): void {
    this.detach?.();
    this.detach = null;
    if (this.audio) {
      this.audio.pause();
      this.audio.removeAttribute("src");
      this.audio = null;
    }
    if (this.url) URL.revokeObjectURL(this.url);
    this.url = null;
    if (this.store.get().key !== null) this.store.update(IDLE);
  }

  /** Stop if `key` is the current audio (e.g. it is being deleted). */
  stopIf(key: string): void {
    if (this.store.get().key === key) this.stop();
  }

  private start(bytes: Uint8Array<ArrayBuffer>): HTMLAudioElement {
    this.url = URL.createObjectURL(new Blob([bytes], { type: "audio/wav" }));
    const audio = new Audio();
    audio.preload = "auto";
    audio.src = this.url;
    const sync = () =>
      this.store.update({
        loading: false,
        playing: !audio.paused,
        position: audio.currentTime,
        duration: Number.isFinite(audio.duration) ? audio.duration : 0,
      });
    const ended = () => this.stop();
    const events = ["play", "pause", "timeupdate", "loadedmetadata", "durationchange"];
    for (const name of events) audio.addEventListener(name, sync);
    audio.addEventListener("ended", ended);
    this.detach = () => {
      for (const name of events) audio.removeEventListener(name, sync);
      audio.removeEventListener("ended", ended);
    };
    this.audio = audio;
    return audio;
  }
}

export const player = new Player();

/** The player's state; re-renders the component when it changes. */
export function usePlayback(): PlaybackState {
  return useStore(player.store);
}
