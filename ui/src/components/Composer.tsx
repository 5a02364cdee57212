// The message box under the chat: Enter sends, Shift+Enter adds a line.
// While a reply streams, Send turns into Stop (Escape works too, anywhere).
// Pictures pasted, dropped on it or picked with its picture button are
// kept at once and shown as thumbnails above the text; they go with the
// next message.

import { useEffect, useRef, useState } from "preact/hooks";
import { useAppState, useCake } from "./context";
import { CloseIcon, PictureIcon, RetryIcon, SendIcon, StopIcon } from "./icons";
import { PictureThumbnail } from "./PictureThumbnail";
import { useAutosize } from "./useAutosize";
import { useNarrow } from "./useNarrow";
import { useFileDropZone } from "./useFileDropZone";

/** What the picture button offers: the formats Cake reads. */
const PICTURE_FILE_TYPES = "image/png,image/jpeg,image/webp,image/gif,.png,.jpg,.jpeg,.webp,.gif";

interface Props {
  /** Changes when another conversation opens, to move focus here. */
  conversationId: string;
  generating: boolean;
  /** Another conversation is replying: this one must wait. */
  blocked: boolean;
  canRegenerate: boolean;
  /** Sends the text and the ids of the pictures attached; resolves false when it was not sent. */
  onSend: (text: string, pictures: string[]) => Promise<boolean>;
  onStop: () => void;
  onRegenerate: () => void;
}

export function Composer({ conversationId, generating, blocked, canRegenerate, onSend, onStop, onRegenerate }: Props) {
  const cake = useCake();
  const attached = useAppState().attached;
  const [text, setText] = useState("");
  const area = useRef<HTMLTextAreaElement>(null);
  const picker = useRef<HTMLInputElement>(null);
  const narrow = useNarrow();
  useAutosize(area, text);
  const { over, handlers } = useFileDropZone((files) => void cake.pictures.attachFiles(files));
  useEffect(() => area.current?.focus(), [conversationId]);

  const adding = attached.some((picture) => picture.id === null);
  const canSend = !generating && !blocked && !adding && (text.trim() !== "" || attached.length > 0);
  async function send() {
    if (!canSend) return;
    const sent = text;
    const pictures = cake.pictures.takeAll();
    setText("");
    const accepted = await onSend(
      sent,
      pictures.flatMap((picture) => (picture.id === null ? [] : [picture.id])),
    );
    // Not sent (no model…): give the text and pictures back unless something new was typed.
    if (!accepted) {
      setText((current) => (current === "" ? sent : current));
      cake.pictures.restore(pictures);
    }
  }

  return (
    <form
      class={`composer${over ? " over" : ""}`}
      data-testid="composer"
      onSubmit={(event) => {
        event.preventDefault();
        void send();
      }}
      {...handlers}
    >
      {attached.length > 0 ? (
        <ul class="composer-pictures" data-testid="composer-pictures">
          {attached.map((picture) => (
            <li key={picture.key} class="composer-picture" data-testid="composer-picture">
              {picture.id === null ? (
                <span class="picture-thumbnail loading" aria-label={`Adding ${picture.name}`} />
              ) : (
                <PictureThumbnail id={picture.id} name={picture.name} />
              )}
              <button
                type="button"
                class="ghost small remove-picture"
                data-testid="remove-picture"
                aria-label={`Remove ${picture.name}`}
                title="Remove"
                onClick={() => cake.pictures.remove(picture.key)}
              >
                <CloseIcon />
              </button>
            </li>
          ))}
        </ul>
      ) : null}
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
        onPaste={(event) => {
          const files = Array.from(event.clipboardData?.files ?? []).filter((file) => file.type.startsWith("image/"));
          if (files.length === 0) return;
          event.preventDefault();
          void cake.pictures.attachFiles(files);
        }}
        onKeyDown={(event) => {
          if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
            event.preventDefault();
            void send();
          }
        }}
      />
      <button
        type="button"
        class="ghost"
        data-testid="attach-picture"
        aria-label="Attach pictures"
        title="Attach pictures (or paste or drop them here)"
        onClick={() => picker.current?.click()}
      >
        <PictureIcon /> <span class="button-label">Pictures</span>
      </button>
      <input
        ref={picker}
        type="file"
        accept={PICTURE_FILE_TYPES}
        multiple
        tabIndex={-1}
        class="visually-hidden"
        data-testid="picture-file-input"
        onChange={(event) => {
          const files = Array.from(event.currentTarget.files ?? []);
          event.currentTarget.value = ""; // choosing the same file again still fires
          void cake.pictures.attachFiles(files);
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
