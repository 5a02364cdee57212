// What both transports share about streams: the event shape, how a stream
// ends (a `done` event, an `error` event, or the user aborting), and turning
// whatever a backend rejects with into a plain Error.

/** Every streamed event is a JSON object with a `type`. */
export interface StreamEvent {
  type: string;
}

/**
 * An `error` event: its message, and whose fault it was (`kind`, see
 * docs/api.md), so a feature can offer a way out of a known failure.
 */
export class StreamError extends Error {
  constructor(
    message: string,
    readonly kind: string | null,
  ) {
    super(message);
    this.name = "StreamError";
  }
}

/**
 * A command's failure, with the `code` the backend gave it where it gave
 * one (e.g. `hub_unreachable`), so the UI can explain a known failure.
 */
export class CommandError extends Error {
  constructor(
    message: string,
    readonly code: string | null,
  ) {
    super(message);
    this.name = "CommandError";
  }
}

/** Called for each event of a stream, `done` included (never for `error`). */
export type EventHandler<E> = (event: E) => void;

/** Collects a stream's events and remembers how it ended. */
export class StreamSink<E extends StreamEvent> {
  private doneEvent: E | null = null;
  private failure: Error | null = null;

  constructor(private readonly onEvent: EventHandler<E>) {}

  get finished(): boolean {
    return this.doneEvent !== null || this.failure !== null;
  }

  /** Accept one event; events after the end are ignored. */
  push(event: unknown): void {
    if (this.finished) return;
    if (!isEvent(event)) {
      this.failure = new Error("Cake sent an event this UI does not understand.");
      return;
    }
    if (event.type === "error") {
      const kind = (event as { kind?: unknown }).kind;
      this.failure = new StreamError(
        messageOf(event) ?? "The operation failed.",
        typeof kind === "string" ? kind : null,
      );
      return;
    }
    this.onEvent(event as E);
    if (event.type === "done") this.doneEvent = event as E;
  }

  /** The `done` event, or the error that ended the stream. */
  result(): E {
    if (this.failure) throw this.failure;
    if (this.doneEvent) return this.doneEvent;
    throw new Error("The connection to Cake closed before the operation finished.");
  }
}

function isEvent(value: unknown): value is StreamEvent {
  return typeof value === "object" && value !== null && typeof (value as StreamEvent).type === "string";
}

function messageOf(value: unknown): string | null {
  if (typeof value === "object" && value !== null) {
    const message = (value as { message?: unknown }).message;
    if (typeof message === "string") return message;
  }
  return null;
}

function codeOf(value: unknown): string | null {
  const code = typeof value === "object" && value !== null ? (value as { code?: unknown }).code : null;
  return typeof code === "string" ? code : null;
}

/** The error a stream rejects with when its AbortSignal fires. */
export function abortError(): DOMException {
  return new DOMException("The operation was stopped.", "AbortError");
}

export function isAbortError(error: unknown): boolean {
  return error instanceof Error || error instanceof DOMException ? error.name === "AbortError" : false;
}

/**
 * Turn a backend failure into an Error with a readable message. Accepts a
 * string, `{message}`, or OpenAI's `{error: {message, code}}` (a
 * [`CommandError`] then).
 */
export function toError(reason: unknown): Error {
  if (reason instanceof Error) return reason;
  if (typeof reason === "string") return new Error(reason);
  const direct = messageOf(reason);
  if (direct !== null) return new Error(direct);
  if (typeof reason === "object" && reason !== null) {
    const body = (reason as { error?: unknown }).error;
    const nested = messageOf(body);
    if (nested !== null) return new CommandError(nested, codeOf(body));
  }
  return new Error(`Unexpected error: ${JSON.stringify(reason)}`);
}
