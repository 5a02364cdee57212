// Inline editor for a user message: Enter resends, Shift+Enter adds a line,
// Escape cancels.

import { useEffect, useRef, useState } from "preact/hooks";
import { useAutosize } from "./useAutosize";

interface Props {
  initial: string;
  onSave: (text: string) => void;
  onCancel: () => void;
}

export function MessageEditor({ initial, onSave, onCancel }: Props) {
  const [text, setText] = useState(initial);
  const area = useRef<HTMLTextAreaElement>(null);
  useAutosize(area, text);
  useEffect(() => {
    area.current?.focus();
    area.current?.setSelectionRange(text.length, text.length);
  }, []);

  const save = () => {
    if (text.trim() !== "") onSave(text);
  };

  return (
    <div class="message-editor">
      <textarea
        ref={area}
        data-testid="edit-input"
        aria-label="Edit message"
        value={text}
        onInput={(event) => setText(event.currentTarget.value)}
        onKeyDown={(event) => {
          if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
            event.preventDefault();
            save();
          } else if (event.key === "Escape") {
            event.preventDefault();
            event.stopPropagation();
            onCancel();
          }
        }}
      />
      <div class="editor-actions">
        <button type="button" onClick={onCancel}>
          Cancel
        </button>
        <button type="button" class="primary" data-testid="edit-save" disabled={text.trim() === ""} onClick={save}>
          Save and resend
        </button>
      </div>
    </div>
  );
}
