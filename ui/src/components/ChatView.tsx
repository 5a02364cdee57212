// The chat screen: model picker, system prompt, sampling settings, the
// messages (streaming in as they are generated) and the message box.

import type { ComponentChildren } from "preact";
import type { ContextOverflow } from "../state/app-state";
import { useEffect, useRef } from "preact/hooks";
import type { Conversation } from "../api/types";
import { versionsAt } from "../lib/alternatives";
import { modelOptionLabel } from "../lib/format";
import { completeModels, effectiveModelId, selectedConversation } from "../state/app-state";
import { Composer } from "./Composer";
import { ConversationTitle } from "./ConversationTitle";
import { ExportMenu } from "./ExportMenu";
import { useAppState, useCake } from "./context";
import { MessageView } from "./MessageView";
import { SamplingPanel } from "./SamplingPanel";
import { StarterCard } from "./StarterCard";
import { useAutosize } from "./useAutosize";
import { SidebarToggle } from "./SidebarToggle";
import { replyKey } from "../lib/conversation";
import { useLivePlayback } from "./live-audio";

export function ChatView() {
  const state = useAppState();
  const cake = useCake();
  const conversation = selectedConversation(state);
  if (!conversation) {
    return <section class="chat" aria-busy="true" />;
  }

  const generating = state.generatingId === conversation.id;
  const busy = state.generatingId !== null;
  const models = completeModels(state);
  const modelId = effectiveModelId(state, conversation);
  const messages = conversation.messages;
  const last = messages[messages.length - 1];
  const showStarter = state.modelsReady && models.length === 0 && messages.length === 0;

  return (
    <section class="chat" aria-label="Chat">
      <header class="view-header chat-header">
        <SidebarToggle />
        <ConversationTitle conversation={conversation} />
        {messages.length > 0 ? <ExportMenu conversationId={conversation.id} /> : null}
        <label class="model-picker">
          <span class="visually-hidden">Model</span>
          <select
            data-testid="model-select"
            value={modelId ?? ""}
            disabled={models.length === 0 || generating}
            onChange={(event) => cake.conversations.change(conversation.id, { model_id: event.currentTarget.value })}
          >
            {modelId === null ? <option value="">No model available</option> : null}
            {models.map((model) => (
              <option key={model.id} value={model.id}>
                {modelOptionLabel(model, state.loadedModelId)}
              </option>
            ))}
          </select>
        </label>
      </header>

      <ConversationSettings conversation={conversation} disabled={generating} />

      <MessageList
        conversation={conversation}
        generating={generating}
        busy={busy}
        footer={
          state.overflow?.conversationId === conversation.id && last?.role === "user" && !busy ? (
            <OverflowNotice overflow={state.overflow} onDrop={() => void cake.chat.sendWithoutOldestTurns()} />
          ) : null
        }
      >
        {showStarter ? <StarterCard showProgress={true} /> : null}
        {!showStarter && messages.length === 0 ? (
          <div class="empty-chat">
            <h2>What can I help with?</h2>
            <p class="muted">Replies are generated on this machine by the model you pick above.</p>
          </div>
        ) : null}
      </MessageList>

      <Composer
        conversationId={conversation.id}
        generating={generating}
        blocked={busy && !generating}
        canRegenerate={!busy && last !== undefined && (last.role === "assistant" || last.role === "user")}
        onSend={(text, pictures) => {
          // Within the key press or click: the reply may be read aloud once made.
          if (conversation.auto_read) cake.speech.prepareReading();
          return cake.chat.send(text, pictures);
        }}
        onStop={() => cake.chat.stop()}
        onRegenerate={() => void cake.chat.regenerate()}
      />
    </section>
  );
}

function ConversationSettings({ conversation, disabled }: { conversation: Conversation; disabled: boolean }) {
  const state = useAppState();
  const cake = useCake();
  const area = useRef<HTMLTextAreaElement>(null);
  useAutosize(area, conversation.system_prompt);
  return (
    <div class="conversation-settings">
      <label class="system-prompt">
        <span class="field-label">System prompt</span>
        <textarea
          ref={area}
          rows={1}
          data-testid="system-prompt"
          placeholder="Optional: how the assistant should behave"
          value={conversation.system_prompt}
          disabled={disabled}
          onInput={(event) => cake.conversations.change(conversation.id, { system_prompt: event.currentTarget.value })}
        />
      </label>
      <SamplingPanel
        sampling={conversation.sampling}
        prefs={state.prefs}
        onSampling={(sampling) => cake.conversations.change(conversation.id, { sampling })}
        onPrefs={(change) => cake.setPrefs(change)}
      />
      {completeModels(state, "speech").length > 0 ? (
        <label
          class="field-check auto-read"
          title="Each new reply is read aloud with the Speech screen's model and voice"
        >
          <input
            type="checkbox"
            data-testid="auto-read"
            checked={conversation.auto_read === true}
            onChange={(event) => {
              const on = event.currentTarget.checked;
              if (on)
                cake.speech.prepareReading(); // within the click: audio may start later
              else cake.speech.stopReading();
              cake.conversations.change(conversation.id, { auto_read: on });
            }}
          />
          <span>Read replies aloud</span>
        </label>
      ) : null}
    </div>
  );
}

/** Why the last message got no reply: the conversation does not fit the model's context. */
function OverflowNotice({ overflow, onDrop }: { overflow: ContextOverflow; onDrop: () => void }) {
  return (
    <div class="overflow-notice" role="alert" data-testid="context-overflow">
      <p>
        <strong>This conversation is too long for the model.</strong> {sentence(overflow.message)}
      </p>
      {overflow.canDropOldest ? (
        <>
          <p class="muted">
            Cake can leave out the oldest messages, keeping the system prompt and your last message, and send the rest.
          </p>
          <button type="button" class="primary small" data-testid="drop-oldest" onClick={onDrop}>
            Drop the oldest turns and send
          </button>
        </>
      ) : (
        <p class="muted">
          Your last message alone does not fit: shorten it (Edit) or raise the context length in Sampling.
        </p>
      )}
    </div>
  );
}

/** `text` as a sentence: a capital first letter and a full stop. */
function sentence(text: string): string {
  const trimmed = text.trim();
  const capital = trimmed.charAt(0).toUpperCase() + trimmed.slice(1);
  return /[.!?]$/.test(capital) ? capital : `${capital}.`;
}

interface ListProps {
  conversation: Conversation;
  generating: boolean;
  busy: boolean;
  children: ComponentChildren;
  /** Shown after the messages. */
  footer?: ComponentChildren;
}

/** Keys that scroll a focused list up. */
const SCROLL_UP_KEYS = new Set(["ArrowUp", "PageUp", "Home"]);

/** The scrolling message list; it follows new text while the reader is at the bottom. */
function MessageList({ conversation, generating, busy, children, footer = null }: ListProps) {
  const cake = useCake();
  const state = useAppState();
  const promptProgress = state.promptProgress;
  const live = useLivePlayback();
  // Replies are read aloud with a speech model, when there is one.
  const canRead = completeModels(state, "speech").length > 0;
  const readingAloud = (key: string, text: string) => {
    const shown = state.readingAloud?.key === key;
    const reading = shown && (state.readingAloud?.making === true || live.playing);
    return {
      reading,
      heardSeconds: reading ? live.playedSeconds : 0,
      onToggle: () => (reading ? cake.speech.stopReading() : void cake.speech.readAloud(key, text)),
    };
  };
  const scroller = useRef<HTMLDivElement>(null);
  const pinned = useRef(true);
  // Where the list was last seen scrolled to, and whether the reader is
  // holding it (a finger on it, or its scroll bar dragged): only a move up
  // the reader makes unpins it, never one the browser makes when the list's
  // content shrinks or its view grows.
  const lastTop = useRef(0);
  const held = useRef(false);
  const messages = conversation.messages;
  const last = messages[messages.length - 1];
  const lastLength = last?.content.length ?? 0;
  // A reply's stats or stop note appear when it ends: followed too.
  const lastEnded = Boolean(last?.stats || last?.stopped);

  const count = useRef(messages.length);
  useEffect(() => {
    pinned.current = true;
  }, [conversation.id]);
  useEffect(() => {
    // A message just sent (and the reply it starts) is always brought into view.
    if (messages.length > count.current) pinned.current = true;
    count.current = messages.length;
    const element = scroller.current;
    if (element && pinned.current) element.scrollTop = element.scrollHeight;
  }, [conversation.id, messages.length, lastLength, lastEnded]);
  useEffect(() => {
    // Whatever else grows the list while it is followed (a reply's buttons
    // appearing when it ends, a code block laid out late) keeps its end in view.
    const element = scroller.current;
    const inner = element?.firstElementChild;
    if (!element || !inner || typeof ResizeObserver === "undefined") return;
    const observer = new ResizeObserver(() => {
      if (pinned.current) element.scrollTop = element.scrollHeight;
    });
    observer.observe(inner);
    // The list's own height changes too (the composer growing or shrinking).
    observer.observe(element);
    return () => observer.disconnect();
  }, []);
  useEffect(() => {
    // A drag of the scroll bar may end outside the list.
    const release = () => {
      held.current = false;
    };
    window.addEventListener("pointerup", release);
    window.addEventListener("touchend", release);
    return () => {
      window.removeEventListener("pointerup", release);
      window.removeEventListener("touchend", release);
    };
  }, []);

  return (
    <div
      class="messages"
      ref={scroller}
      onWheel={(event) => {
        if (event.deltaY < 0) pinned.current = false;
      }}
      onKeyDown={(event) => {
        if (SCROLL_UP_KEYS.has(event.key)) pinned.current = false;
      }}
      onPointerDown={() => {
        held.current = true;
      }}
      onTouchStart={() => {
        held.current = true;
      }}
      onScroll={(event) => {
        // Scroll events arrive a frame late: by then the list may have grown
        // again (a reply's last tokens, its stop note), so a gap alone does
        // not mean the reader left the end. Reaching the end pins the list,
        // but only on the way down: a wheel's smooth scroll up passes through
        // the last few pixels first, and must not pin the list again.
        const element = event.currentTarget;
        const atEnd = element.scrollHeight - element.scrollTop - element.clientHeight < 40;
        if (atEnd && element.scrollTop >= lastTop.current) pinned.current = true;
        else if (held.current && element.scrollTop < lastTop.current) pinned.current = false;
        lastTop.current = element.scrollTop;
      }}
    >
      <div class="messages-inner">
        {children}
        {messages.map((message, index) => (
          <MessageView
            key={`${conversation.id}:${index}`}
            message={message}
            streaming={generating && index === messages.length - 1 && message.role === "assistant"}
            promptProgress={generating && index === messages.length - 1 ? promptProgress : null}
            onEdit={message.role === "user" && !busy ? (text) => void cake.chat.editAndResend(index, text) : null}
            onRegenerate={
              message.role === "assistant" && !busy && messages[index - 1]?.role === "user"
                ? () => void cake.chat.regenerate(index)
                : null
            }
            versions={versionsAt(messages, index)}
            onShowVersion={busy ? null : (version) => void cake.chat.showVersion(index, version)}
            readAloud={canRead ? readingAloud(replyKey(conversation.id, index), message.content) : null}
          />
        ))}
        {footer}
      </div>
    </div>
  );
}
