// Toasts above the screen, in the page's flow so they never cover the
// message box or a form: failures in plain words (the technical text behind
// "Details"), with their way out where there is one, kept until dismissed;
// notices that are not failures (tone "info") fade by themselves.

import type { Notice } from "../state/app-state";
import { useAppState, useCake } from "./context";
import { FailureActionButton } from "./FailureActionButton";

export function Notices() {
  const { notices } = useAppState();
  if (notices.length === 0) return null;
  return (
    <div class="notices" role="region" aria-label="Messages">
      {notices.map((notice) => (
        <NoticeToast key={notice.id} notice={notice} />
      ))}
    </div>
  );
}

function NoticeToast({ notice }: { notice: Notice }) {
  const cake = useCake();
  const dismiss = () => cake.notices.dismiss(notice.id);
  return (
    <div
      class={`notice${notice.tone === "info" ? " info" : ""}`}
      role={notice.tone === "info" ? "status" : "alert"}
      data-testid="error-message"
      data-tone={notice.tone ?? "error"}
    >
      <div class="notice-text">
        <span data-testid="notice-message">{notice.message}</span>
        {notice.action ? <FailureActionButton action={notice.action} onDone={dismiss} /> : null}
        {notice.detail ? (
          <details class="notice-detail">
            <summary>Details</summary>
            <code data-testid="notice-detail">{notice.detail}</code>
          </details>
        ) : null}
      </div>
      <button type="button" class="icon-button" aria-label="Dismiss" data-testid="notice-dismiss" onClick={dismiss}>
        ×
      </button>
    </div>
  );
}
