// The one door between the UI and Cake. `call` runs a command, `stream`
// runs a streaming command. Inside the desktop window (Tauri) they use
// `invoke`; in a browser they use HTTP + Server-Sent Events. This folder is
// the only code that knows which one is active: everything else imports
// from here (usually through src/api/commands.ts).

import { randomId } from "../lib/ids";
import { httpCall, httpStream } from "./http";
import type { OpenAiApiStatus } from "../api/types";
import {
  openAiApi,
  pickPath,
  setOpenAiApi,
  setStartAtLogin,
  startAtLogin,
  tauriCall,
  tauriStream,
  watchFileDrops,
} from "./tauri";
import type { EventHandler, StreamEvent } from "./events";

export { isAbortError, StreamError } from "./events";
export type { EventHandler, StreamEvent } from "./events";

const inTauri = typeof window !== "undefined" && "__TAURI_INTERNALS__" in window;

/** Run a command and return its JSON result; rejects with Error(message). */
export function call<T>(command: string, args: object = {}): Promise<T> {
  return inTauri ? tauriCall<T>(command, args) : httpCall<T>(command, args);
}

/**
 * Run a streaming command. `onEvent` sees every event (the final `done`
 * included); the promise resolves with the `done` event, rejects with
 * Error(message) on an `error` event or failure, and with an AbortError
 * when `signal` fires. A fresh `stream_id` is added to the args.
 */
export function stream<E extends StreamEvent>(
  command: string,
  args: object,
  onEvent: EventHandler<E>,
  signal?: AbortSignal,
): Promise<E> {
  const withId = { ...args, stream_id: randomId() };
  return inTauri ? tauriStream<E>(command, withId, onEvent, signal) : httpStream<E>(command, withId, onEvent, signal);
}

/** Features of the host's file system, only where the UI runs on that host. */
export interface NativeFiles {
  pick(kind: "file" | "folder"): Promise<string | null>;
  watchDrops(handlers: { hovering: (over: boolean) => void; dropped: (paths: string[]) => void }): Promise<() => void>;
}

/** The desktop window's file picker and drag and drop; null in a browser. */
export const nativeFiles: NativeFiles | null = inTauri ? { pick: pickPath, watchDrops: watchFileDrops } : null;

/** How the desktop app starts with the user's session, and what it serves to other programs. */
export interface DesktopSession {
  startAtLogin(): Promise<boolean>;
  setStartAtLogin(enabled: boolean): Promise<boolean>;
  openAiApi(): Promise<OpenAiApiStatus>;
  setOpenAiApi(enabled: boolean, port: number): Promise<OpenAiApiStatus>;
}

/** The desktop window's session settings; null in a browser. */
export const desktopSession: DesktopSession | null = inTauri
  ? { startAtLogin, setStartAtLogin, openAiApi, setOpenAiApi }
  : null;
