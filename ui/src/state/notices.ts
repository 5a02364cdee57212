// Error messages shown to the user as toasts. Any action that fails reports
// here instead of throwing, so the app stays usable. Notices that are not
// failures (`inform`) use the same toasts in a calmer colour.

import { isAbortError } from "../transport";
import type { Store } from "./store";
import type { AppState, Notice } from "./app-state";

/** At most this many notices are kept; older ones drop off. */
const MAX_NOTICES = 3;

/** A notice closes by itself after this long. */
export const NOTICE_LIFETIME_MS = 15_000;

export function createNotices(store: Store<AppState>) {
  let nextId = 1;

  function dismiss(id: number): void {
    store.update((state) => ({ notices: state.notices.filter((notice) => notice.id !== id) }));
  }

  /** Show an error (a stop by the user is not an error and is ignored). */
  function report(error: unknown): void {
    if (isAbortError(error)) return;
    const message = error instanceof Error ? error.message : String(error);
    show({ id: nextId++, message: readable(message) || "Something went wrong." });
  }

  /** Show something to know that is not a failure (e.g. a voice prompt was cut). */
  function inform(message: string): void {
    show({ id: nextId++, message, tone: "info" });
  }

  function show(notice: Notice): void {
    // The same message again replaces the old toast instead of stacking.
    store.update((state) => ({
      notices: [...state.notices.filter((shown) => shown.message !== notice.message), notice].slice(-MAX_NOTICES),
    }));
    setTimeout(() => dismiss(notice.id), NOTICE_LIFETIME_MS);
  }

  return { report, inform, dismiss };
}

export type Notices = ReturnType<typeof createNotices>;

/** An error message without the operating system's error numbers. */
export function readable(message: string): string {
  return message.replace(/\s*\(os error \d+\)/g, "").trim();
}
