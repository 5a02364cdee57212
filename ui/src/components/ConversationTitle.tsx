// The chat's title, and renaming it in place: Enter or leaving the field
// saves, Escape cancels, an empty name gives the title back to the first
// message.

import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";
import type { Conversation } from "../api/types";
import { MAX_TITLE_LENGTH, displayTitle } from "../lib/conversation";
import { useCake } from "./context";
import { EditIcon } from "./icons";

export function ConversationTitle({ conversation }: { conversation: Conversation }) {
  const cake = useCake();
  const [editing, setEditing] = useState(false);
  const field = useRef<HTMLInputElement>(null);
  // Set once an edit has ended, so the blur that follows Enter or Escape
  // (the field leaving the page) does not end it a second time. Cleared when
  // an edit starts, not in an effect: a key pressed before effects run (a
  // busy page) must still end the edit.
  const ended = useRef(false);
  const title = displayTitle(conversation);

  const start = () => {
    ended.current = false;
    setEditing(true);
  };
  // Before paint, so the first key typed replaces the old name.
  useLayoutEffect(() => {
    if (editing) field.current?.select();
  }, [editing]);
  // Another conversation opened: stop editing this one.
  useEffect(() => setEditing(false), [conversation.id]);

  const finish = (save: boolean) => {
    if (ended.current) return;
    ended.current = true;
    setEditing(false);
    const name = field.current?.value;
    if (save && name !== undefined && name.trim() !== title) void cake.conversations.rename(conversation.id, name);
  };

  if (editing) {
    return (
      <input
        ref={field}
        type="text"
        class="chat-title-input"
        data-testid="title-input"
        aria-label="Conversation name"
        maxLength={MAX_TITLE_LENGTH}
        defaultValue={conversation.title_set ? conversation.title : title}
        onKeyDown={(event) => {
          if (event.key === "Enter") finish(true);
          else if (event.key === "Escape") {
            event.stopPropagation(); // Escape here cancels the rename, not a reply
            finish(false);
          }
        }}
        onBlur={() => finish(true)}
      />
    );
  }
  return (
    <div class="chat-title-row">
      <h1 class="chat-title" data-testid="chat-title" title={title}>
        {title}
      </h1>
      <button
        type="button"
        class="icon-button"
        data-testid="rename-conversation"
        aria-label="Rename conversation"
        title="Rename conversation"
        onClick={start}
      >
        <EditIcon />
      </button>
    </div>
  );
}
