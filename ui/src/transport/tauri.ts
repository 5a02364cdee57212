// The desktop transport, used inside Cake's Tauri window. Two IPC commands
// of the Rust side (src-tauri/src/desktop) carry every command of
// docs/api.md: `app_call {command, args}` for plain commands, and
// `app_stream {command, args, events}` for streams, whose events arrive on
// the `events` Channel. A stream is stopped with the `cancel_stream`
// command and its `stream_id`. Also the desktop-only file features (open
// dialog, drag and drop). Tauri packages are imported on first use so that
// the browser bundle never loads them.

import { StreamSink, abortError, toError, type EventHandler, type StreamEvent } from "./events";
import type { OpenAiApiStatus } from "../api/types";

/** The Rust side's IPC commands (see src-tauri/src/desktop/mod.rs). */
const CALL = "app_call";
const STREAM = "app_stream";

type Core = typeof import("@tauri-apps/api/core");
let corePromise: Promise<Core> | null = null;
function core(): Promise<Core> {
  corePromise ??= import("@tauri-apps/api/core");
  return corePromise;
}

export async function tauriCall<T>(command: string, args: object): Promise<T> {
  const { invoke } = await core();
  try {
    return await invoke<T>(CALL, { command, args });
  } catch (error) {
    throw toError(error);
  }
}

/**
 * Run a streaming command. `app_stream` may resolve as soon as the work has
 * started, so the stream ends with its `done` or `error` event (or a failed
 * start, or the user's abort), not with the invoke.
 */
export async function tauriStream<E extends StreamEvent>(
  command: string,
  args: { stream_id: string } & object,
  onEvent: EventHandler<E>,
  signal?: AbortSignal,
): Promise<E> {
  const { invoke, Channel } = await core();
  if (signal?.aborted) throw abortError();

  const sink = new StreamSink<E>(onEvent);
  let finish = () => {};
  const finished = new Promise<void>((resolve) => (finish = resolve));

  const events = new Channel<unknown>();
  events.onmessage = (event) => {
    sink.push(event);
    if (sink.finished) finish();
  };
  const onAbort = () => {
    tauriCall("cancel_stream", { stream_id: args.stream_id }).catch(() => {});
    finish();
  };
  signal?.addEventListener("abort", onAbort, { once: true });

  try {
    const started = invoke(STREAM, { command, args, events }).then(
      () => finished, // started (or already over): the events tell the rest
      (error: unknown) => {
        throw toError(error);
      },
    );
    await Promise.race([finished, started]);
  } catch (error) {
    if (!signal?.aborted && !sink.finished) throw error;
  } finally {
    signal?.removeEventListener("abort", onAbort);
    events.onmessage = () => {};
  }
  if (signal?.aborted && !sink.finished) throw abortError();
  return sink.result();
}

// ---- Desktop-only file features -------------------------------------------

/** Ask for a model file or folder with the system's open dialog. */
export async function pickPath(kind: "file" | "folder"): Promise<string | null> {
  const { open } = await import("@tauri-apps/plugin-dialog");
  const picked =
    kind === "folder"
      ? await open({ directory: true, multiple: false, title: "Choose a model folder" })
      : await open({
          directory: false,
          multiple: false,
          title: "Choose a model file",
          filters: [{ name: "Model files", extensions: ["gguf", "safetensors", "json"] }],
        });
  return typeof picked === "string" ? picked : null;
}

/** Report files dragged over / dropped on the window. Returns an unsubscribe. */
export async function watchFileDrops(handlers: {
  hovering: (over: boolean) => void;
  dropped: (paths: string[]) => void;
}): Promise<() => void> {
  const { getCurrentWebview } = await import("@tauri-apps/api/webview");
  return getCurrentWebview().onDragDropEvent(({ payload }) => {
    if (payload.type === "enter" || payload.type === "over") handlers.hovering(true);
    else if (payload.type === "leave") handlers.hovering(false);
    else {
      handlers.hovering(false);
      if (payload.paths.length > 0) handlers.dropped(payload.paths);
    }
  });
}

// ---- Desktop-only session settings ----------------------------------------

/** Whether Cake starts (in the background) when the user logs in. */
export async function startAtLogin(): Promise<boolean> {
  const { invoke } = await core();
  return invoke<boolean>("start_at_login").catch((error: unknown) => {
    throw toError(error);
  });
}

/** Writes or removes the XDG autostart entry; returns the new state. */
export async function setStartAtLogin(enabled: boolean): Promise<boolean> {
  const { invoke } = await core();
  return invoke<boolean>("set_start_at_login", { enabled }).catch((error: unknown) => {
    throw toError(error);
  });
}

/** Whether the OpenAI API is served to other programs, where, and its key. */
export async function openAiApi(): Promise<OpenAiApiStatus> {
  const { invoke } = await core();
  return invoke<OpenAiApiStatus>("openai_api").catch((error: unknown) => {
    throw toError(error);
  });
}

/** Switches serving the OpenAI API on or off, on `port`; returns the new state. */
export async function setOpenAiApi(enabled: boolean, port: number): Promise<OpenAiApiStatus> {
  const { invoke } = await core();
  return invoke<OpenAiApiStatus>("set_openai_api", { enabled, port }).catch((error: unknown) => {
    throw toError(error);
  });
}
