// Toasts in the corner of the window, each dismissible: errors, and notices
// that are not failures (tone "info", e.g. a voice prompt cut at 60 s).

import { useAppState, useCake } from "./context";

export function Notices() {
  const { notices } = useAppState();
  const cake = useCake();
  if (notices.length === 0) return null;
  return (
    <div class="notices" role="region" aria-label="Messages">
      {notices.map((notice) => (
        <div
          key={notice.id}
          class={`notice${notice.tone === "info" ? " info" : ""}`}
          role={notice.tone === "info" ? "status" : "alert"}
          data-testid="error-message"
          data-tone={notice.tone ?? "error"}
        >
          <span class="notice-text">{notice.message}</span>
          <button
            type="button"
            class="icon-button"
            aria-label="Dismiss"
            onClick={() => cake.notices.dismiss(notice.id)}
          >
            ×
          </button>
        </div>
      ))}
    </div>
  );
}
