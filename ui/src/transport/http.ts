// The browser transport, used when the UI is served by `cake serve`:
// `POST /app/<command>` with the args as JSON. Plain commands answer JSON;
// streaming commands answer `text/event-stream`. Aborting the fetch closes
// the connection, which cancels the work on the server.

import { SseParser } from "./sse";
import { StreamSink, abortError, toError, type EventHandler, type StreamEvent } from "./events";

function endpoint(command: string): string {
  return `/app/${encodeURIComponent(command)}`;
}

async function post(command: string, args: object, accept: string, signal?: AbortSignal): Promise<Response> {
  let response: Response;
  try {
    response = await fetch(endpoint(command), {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: accept },
      body: JSON.stringify(args),
      signal,
    });
  } catch (error) {
    if (signal?.aborted) throw abortError();
    throw new Error(`Cannot reach Cake (${toError(error).message}).`);
  }
  if (!response.ok) throw await errorFromResponse(response);
  return response;
}

/** A non-2xx answer carries `{"error": {"message", "code"}}`; fall back to the status. */
export async function errorFromResponse(response: Response): Promise<Error> {
  const text = await response.text().catch(() => "");
  try {
    const body: unknown = JSON.parse(text);
    const message = (body as { error?: { message?: unknown } })?.error?.message;
    if (typeof message === "string" && message !== "") return toError(body);
  } catch {
    // Not JSON: use the status line below.
  }
  const detail = text.trim().slice(0, 200);
  return new Error(`Cake answered HTTP ${response.status}${detail ? `: ${detail}` : ""}`);
}

export async function httpCall<T>(command: string, args: object): Promise<T> {
  const response = await post(command, args, "application/json");
  const text = await response.text();
  return (text.trim() === "" ? {} : JSON.parse(text)) as T;
}

export async function httpStream<E extends StreamEvent>(
  command: string,
  args: object,
  onEvent: EventHandler<E>,
  signal?: AbortSignal,
): Promise<E> {
  if (signal?.aborted) throw abortError();
  const response = await post(command, args, "text/event-stream", signal);
  if (!response.body) throw new Error("Cake sent an empty stream.");

  const sink = new StreamSink<E>(onEvent);
  const parser = new SseParser((data) => {
    let event: unknown;
    try {
      event = JSON.parse(data);
    } catch {
      event = null; // StreamSink reports it as not understood
    }
    sink.push(event);
  });
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  try {
    while (!sink.finished) {
      const { done, value } = await reader.read();
      if (done) {
        parser.feed(decoder.decode());
        parser.end();
        break;
      }
      parser.feed(decoder.decode(value, { stream: true }));
    }
  } catch (error) {
    if (signal?.aborted) throw abortError();
    throw new Error(`The connection to Cake broke (${toError(error).message}).`);
  } finally {
    // After `done`/`error` nothing more is needed: release the connection.
    reader.cancel().catch(() => {});
  }
  if (signal?.aborted && !sink.finished) throw abortError();
  return sink.result();
}
