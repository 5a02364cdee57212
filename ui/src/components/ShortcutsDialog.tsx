// The list of keyboard shortcuts, in a modal dialog (Ctrl+/ or the keyboard
// button in the sidebar). Escape or Close closes it.

import { useRef } from "preact/hooks";
import { SHORTCUTS, keysLabel, onMac } from "../lib/shortcuts";
import { useModal } from "./useModal";

export function ShortcutsDialog({ onClose }: { onClose: () => void }) {
  const close = useRef<HTMLButtonElement>(null);
  const dialog = useModal(close);
  const mac = onMac();
  return (
    <dialog
      ref={dialog}
      class="confirm-dialog shortcuts-dialog"
      data-testid="shortcuts-dialog"
      aria-labelledby="shortcuts-title"
      onCancel={(event) => {
        event.preventDefault(); // Escape: let the parent unmount us
        onClose();
      }}
    >
      <h2 id="shortcuts-title">Keyboard shortcuts</h2>
      <table class="shortcuts">
        <tbody>
          {SHORTCUTS.map((shortcut) => (
            <tr key={shortcut.action}>
              <td>{shortcut.description}</td>
              <td>
                <kbd>{keysLabel(shortcut, mac)}</kbd>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <div class="dialog-actions">
        <button type="button" ref={close} onClick={onClose}>
          Close
        </button>
      </div>
    </dialog>
  );
}
