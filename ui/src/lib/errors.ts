// What a person reads about a failure: the cause and what to do in plain
// words, the technical text kept behind "Details" (and in the browser's
// console), and the one action that fixes it, where there is one.

import { CommandError, StreamError } from "../transport/events";

/** A way out of a failure, offered as a button beside its message. */
export type FailureAction = "import-model";

export interface ExplainedFailure {
  message: string;
  /** The technical text, when it says more than `message`. */
  detail?: string;
  action?: FailureAction;
}

export const HUB_UNREACHABLE_MESSAGE =
  "No internet connection: Cake can't reach Hugging Face. Import a file you have instead.";

/** Messages longer than this show their first part, the rest under "Details". */
const LONGEST_MESSAGE = 240;

/** `error` in plain words (a backend's message is already written for people; URLs and length are trimmed). */
export function explainFailure(error: unknown): ExplainedFailure {
  const raw = readable(error instanceof Error ? error.message : String(error));
  const code = error instanceof CommandError ? error.code : error instanceof StreamError ? error.kind : null;
  if (code === "hub_unreachable") return { message: HUB_UNREACHABLE_MESSAGE, detail: raw, action: "import-model" };
  let message = raw.replace(/\bhttps?:\/\/([^/\s'"`]+)[^\s'"`]*/g, "$1");
  if (message.length > LONGEST_MESSAGE) {
    const cut = message.lastIndexOf(" ", LONGEST_MESSAGE);
    message = `${message.slice(0, cut > 0 ? cut : LONGEST_MESSAGE)}…`;
  }
  return message === raw ? { message } : { message, detail: raw };
}

/** An error message without the operating system's error numbers. */
export function readable(message: string): string {
  return message.replace(/\s*\(os error \d+\)/g, "").trim();
}
