// Desktop only: the Start at login switch (an XDG autostart entry that
// starts Cake in the background), and what closing the window does while
// this machine serves as a worker.

import { useEffect, useState } from "preact/hooks";
import type { DesktopSession } from "../transport";
import { useCake } from "./context";

export function StartAtLogin({ session }: { session: DesktopSession }) {
  const cake = useCake();
  const [enabled, setEnabled] = useState<boolean | null>(null);

  useEffect(() => {
    session.startAtLogin().then(setEnabled, (error: unknown) => cake.notices.report(error));
  }, [session]);

  const change = (wanted: boolean) => {
    session.setStartAtLogin(wanted).then(setEnabled, (error: unknown) => cake.notices.report(error));
  };

  return (
    <div class="start-at-login">
      <label class="field-check cluster-check">
        <input
          type="checkbox"
          data-testid="start-at-login"
          checked={enabled === true}
          disabled={enabled === null}
          onChange={(event) => change(event.currentTarget.checked)}
        />
        <span>
          <span class="cluster-check-label">Start at login</span>
          <span class="field-hint"> start Cake in the background when you log in (applies at once)</span>
        </span>
      </label>
      <p class="field-hint" data-testid="worker-close-notice">
        While this machine joins as a worker, closing the window keeps it serving. Open the window again from the tray
        icon, or by starting Cake again; quit from the tray icon, or turn Join as worker off first.
      </p>
    </div>
  );
}
