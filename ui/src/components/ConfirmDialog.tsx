// A modal "are you sure?" dialog built on the native <dialog> element, which
// traps focus and closes on Escape. Cancel has focus first, so a stray Enter
// never deletes anything.

import { useRef } from "preact/hooks";
import { useModal } from "./useModal";

interface Props {
  title: string;
  message: string;
  confirmLabel: string;
  onConfirm: () => void;
  onCancel: () => void;
}

export function ConfirmDialog({ title, message, confirmLabel, onConfirm, onCancel }: Props) {
  const cancelButton = useRef<HTMLButtonElement>(null);
  const dialog = useModal(cancelButton);

  return (
    <dialog
      ref={dialog}
      class="confirm-dialog"
      data-testid="confirm-dialog"
      aria-labelledby="confirm-title"
      onCancel={(event) => {
        event.preventDefault(); // Escape: let the parent unmount us
        onCancel();
      }}
    >
      <h2 id="confirm-title">{title}</h2>
      <p>{message}</p>
      <div class="dialog-actions">
        <button type="button" ref={cancelButton} onClick={onCancel}>
          Cancel
        </button>
        <button type="button" class="danger" data-testid="confirm-button" onClick={onConfirm}>
          {confirmLabel}
        </button>
      </div>
    </dialog>
  );
}
