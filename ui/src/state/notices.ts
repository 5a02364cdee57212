// Messages shown to the user as toasts. Any action that fails reports here
// instead of throwing, so the app stays usable. A failure reads in plain
// words (lib/errors.ts), with its technical text behind "Details" and in the
// console, and stays until dismissed; notices that are not failures
// (`inform`) use a calmer colour and fade by themselves.

import { isAbortError } from "../transport";
import { explainFailure } from "../lib/errors";
import type { Store } from "./store";
import type { AppState, Notice } from "./app-state";

/** At most this many notices are kept; older ones drop off. */
const MAX_NOTICES = 3;

/** A notice that is not a failure closes by itself after this long. */
export const NOTICE_LIFETIME_MS = 8_000;

export function createNotices(store: Store<AppState>) {
  let nextId = 1;

  function dismiss(id: number): void {
    store.update((state) => ({ notices: state.notices.filter((notice) => notice.id !== id) }));
  }

  /** Show an error (a stop by the user is not an error and is ignored). */
  function report(error: unknown): void {
    if (isAbortError(error)) return;
    const explained = explainFailure(error);
    if (explained.detail) console.warn(explained.detail);
    show({ id: nextId++, ...explained, message: explained.message || "Something went wrong." });
  }

  /** Show something to know that is not a failure (e.g. a voice prompt was cut). */
  function inform(message: string): void {
    const notice: Notice = { id: nextId++, message, tone: "info" };
    show(notice);
    setTimeout(() => dismiss(notice.id), NOTICE_LIFETIME_MS);
  }

  function show(notice: Notice): void {
    // The same message again replaces the old toast instead of stacking.
    store.update((state) => ({
      notices: [...state.notices.filter((shown) => shown.message !== notice.message), notice].slice(-MAX_NOTICES),
    }));
  }

  return { report, inform, dismiss };
}

export type Notices = ReturnType<typeof createNotices>;
