// Error toasts in the corner of the window, each dismissible.

import { useAppState, useCake } from "./context";

export function Notices() {
  const { notices } = useAppState();
  const cake = useCake();
  if (notices.length === 0) return null;
  return (
    <div class="notices" role="region" aria-label="Errors">
      {notices.map((notice) => (
        <div key={notice.id} class="notice" role="alert" data-testid="error-message">
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
