// The message box under the chat: Enter sends, Shift+Enter adds a line.
// While a reply streams, Send turns into Stop (Escape works too, anywhere).

import { useEffect, useRef, useState } from "preact/hooks";
import { RetryIcon, SendIcon, StopIcon } from "./icons";
import { useAutosize } from "./useAutosize";
import { useNarrow } from "./useNarrow";

interface Props {
  /** Changes when another conversation opens, to move focus here. */
  conversationId: string;
  generating: boolean;
  /** Another conversation is replying: this one must wait. */
  blocked: boolean;
  canRegenerate: boolean;
  onSend: (text: string) => Promise<boolean>;
  onStop: () => void;
  onRegenerate: () => void;
}

export function Composer({ conversationId, generating, blocked, canRegenerate, onSend, onStop, onRegenerate }: Props) {
  const [text, setText] = useState("");
  const area = useRef<HTMLTextAreaElement>(null);
  const narrow = useNarrow();
  useAutosize(area, text);
  useEffect(() => area.current?.focus(), [conversationId]);

  const canSend = !generating && !blocked && text.trim() !== "";
  async function send() {
    if (!canSend) return;
    const sent = text;
    setText("");
    const accepted = await onSend(sent);
    // Not sent (no model…): give the text back unless something new was typed.
    if (!accepted) setText((current) => (current === "" ? sent : current));
  }

  return (
    <form
      class="composer"
      onSubmit={(event) => {
        event.preventDefault();
        void send();
      }}
    >
      <textarea
        ref={area}
        rows={1}
        data-testid="chat-input"
        aria-label="Message"
        placeholder={
          blocked
            ? "Waiting for the other conversation's reply…"
            : narrow
              ? "Message Cake"
              : "Message Cake (Enter to send, Shift+Enter for a new line)"
        }
        value={text}
        onInput={(event) => setText(event.currentTarget.value)}
        onKeyDown={(event) => {
          if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
            event.preventDefault();
            void send();
          }
        }}
      />
      <div class="composer-actions">
        {canRegenerate ? (
          <button
            type="button"
            class="ghost"
            data-testid="regenerate-button"
            onClick={onRegenerate}
            aria-label="Regenerate"
            title="Regenerate the last reply"
          >
            <RetryIcon /> <span class="button-label">Regenerate</span>
          </button>
        ) : null}
        {generating ? (
          <button
            type="button"
            class="stop"
            data-testid="stop-button"
            onClick={onStop}
            aria-label="Stop"
            title="Stop (Escape)"
          >
            <StopIcon /> <span class="button-label">Stop</span>
          </button>
        ) : (
          <button type="submit" class="primary" data-testid="send-button" aria-label="Send" disabled={!canSend}>
            <SendIcon /> <span class="button-label">Send</span>
          </button>
        )}
      </div>
    </form>
  );
}
