// The button that offers a failure's way out (lib/errors.ts): "Import a
// model file" opens the Models screen at its import field.

import type { FailureAction } from "../lib/errors";
import { useCake } from "./context";

const LABELS: Record<FailureAction, string> = { "import-model": "Import a model file" };

export function FailureActionButton({ action, onDone }: { action: FailureAction; onDone?: () => void }) {
  const cake = useCake();
  return (
    <button
      type="button"
      class="small"
      data-testid="failure-action"
      onClick={() => {
        cake.showView("models");
        // Once the Models screen has rendered.
        setTimeout(() => document.querySelector<HTMLInputElement>('[data-testid="import-path"]')?.focus());
        onDone?.();
      }}
    >
      {LABELS[action]}
    </button>
  );
}
