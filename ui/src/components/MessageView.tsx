// One chat message. Assistant replies render as (safe) Markdown with copy
// buttons on code blocks and their speed stats, and can be made again, the
// versions kept and switchable, and read aloud; user messages show their
// pictures' thumbnails and their text as plain text, and can be edited and
// resent. Every message can be copied.

import { useMemo, useState } from "preact/hooks";
import type { ReplyStats, StoredMessage } from "../api/types";
import type { PromptProgress } from "../state/app-state";
import { copyText } from "../lib/clipboard";
import { formatSeconds, formatTokensPerSecond, stopNote } from "../lib/format";
import { renderMarkdown } from "../lib/markdown";
import { CopyButton } from "./CopyButton";
import { EditIcon, RetryIcon, SpeakerIcon, StopIcon } from "./icons";
import { MessageEditor } from "./MessageEditor";
import { PictureThumbnail } from "./PictureThumbnail";
import { ProgressBar } from "./ProgressBar";

interface Props {
  message: StoredMessage;
  streaming: boolean;
  /** While this reply waits for a long prompt to be read: how far it is. */
  promptProgress?: PromptProgress | null;
  /** Null when the message cannot be edited now (not a user message, or busy). */
  onEdit: ((text: string) => void) | null;
  /** Null when this reply cannot be made again now (not a reply, or busy). */
  onRegenerate?: (() => void) | null;
  /** The conversation's versions from this reply on: which shows, how many. */
  versions?: { shown: number; count: number };
  /** Shows another version (0-based); null while busy. */
  onShowVersion?: ((version: number) => void) | null;
  /** A reply that can be read aloud (a speech model is there): whether it is being read, and the toggle. */
  readAloud?: { reading: boolean; heardSeconds: number; onToggle: () => void } | null;
}

export function MessageView({
  message,
  streaming,
  promptProgress = null,
  onEdit,
  onRegenerate = null,
  versions = { shown: 0, count: 1 },
  onShowVersion = null,
  readAloud = null,
}: Props) {
  const [editing, setEditing] = useState(false);
  const isUser = message.role === "user";

  return (
    <article
      class={`message ${message.role}${streaming ? " streaming" : ""}`}
      data-testid="message"
      data-role={message.role}
    >
      <div class="message-role">{isUser ? "You" : message.role === "assistant" ? "Cake" : "System"}</div>
      {editing && onEdit ? (
        <MessageEditor
          initial={message.content}
          onCancel={() => setEditing(false)}
          onSave={(text) => {
            setEditing(false);
            onEdit(text);
          }}
        />
      ) : streaming && message.content === "" && promptProgress ? (
        <PromptReading progress={promptProgress} />
      ) : streaming && message.content === "" && message.reasoning === undefined ? (
        <div class="message-body typing" aria-label="Cake is writing">
          <span />
          <span />
          <span />
        </div>
      ) : isUser ? (
        <>
          {message.pictures && message.pictures.length > 0 ? (
            <div class="message-pictures" data-testid="message-pictures">
              {message.pictures.map((id, i) => (
                <PictureThumbnail key={`${i}:${id}`} id={id} />
              ))}
            </div>
          ) : null}
          {message.content !== "" ? <UserBody content={message.content} /> : null}
        </>
      ) : (
        <>
          {message.reasoning !== undefined ? (
            <Reasoning text={message.reasoning} thinking={streaming && message.content === ""} />
          ) : null}
          {message.content === "" && message.stats ? (
            <div class="message-body muted" data-testid="empty-reply">
              The model ended its reply without writing anything.
            </div>
          ) : message.content !== "" || !streaming ? (
            <AssistantBody content={message.content} />
          ) : null}
        </>
      )}
      {message.stats ? <StatsLine stats={message.stats} /> : null}
      {!message.stats && message.stopped ? (
        <div class="reply-stats" data-testid="reply-stopped">
          <span>stopped by you</span>
        </div>
      ) : null}
      {!streaming && !editing ? (
        <div class="message-actions">
          {versions.count > 1 ? <VersionSwitch versions={versions} onShow={onShowVersion} /> : null}
          {message.content !== "" ? <CopyButton text={message.content} testid="copy-message" /> : null}
          {isUser && onEdit ? (
            <button
              type="button"
              class="ghost small"
              data-testid="edit-button"
              title="Edit and resend (this version and the replies after it are kept)"
              onClick={() => setEditing(true)}
            >
              <EditIcon /> Edit
            </button>
          ) : null}
          {!isUser && onRegenerate ? (
            <button
              type="button"
              class="ghost small"
              data-testid="regenerate-reply"
              title="Write this reply again (this version is kept)"
              onClick={onRegenerate}
            >
              <RetryIcon /> Regenerate
            </button>
          ) : null}
          {!isUser && readAloud && message.content.trim() !== "" ? (
            <button
              type="button"
              class={`ghost small${readAloud.reading ? " reading-aloud" : ""}`}
              data-testid="read-aloud"
              data-reading={readAloud.reading ? "yes" : "no"}
              data-heard-seconds={readAloud.reading ? readAloud.heardSeconds.toFixed(2) : undefined}
              aria-pressed={readAloud.reading}
              title={
                readAloud.reading
                  ? "Stop reading this reply"
                  : "Read this reply aloud (the Speech screen's model and voice)"
              }
              onClick={readAloud.onToggle}
            >
              {readAloud.reading ? (
                <>
                  <StopIcon /> Stop reading
                </>
              ) : (
                <>
                  <SpeakerIcon /> Read aloud
                </>
              )}
            </button>
          ) : null}
        </div>
      ) : null}
    </article>
  );
}

/** "‹ 2 / 3 ›": which version of the conversation shows from this reply on. */
function VersionSwitch({
  versions,
  onShow,
}: {
  versions: { shown: number; count: number };
  onShow: ((version: number) => void) | null;
}) {
  const { shown, count } = versions;
  return (
    <span class="version-switch" data-testid="version-switch">
      <button
        type="button"
        class="ghost small"
        aria-label="Previous version"
        data-testid="previous-version"
        disabled={!onShow || shown === 0}
        onClick={() => onShow?.(shown - 1)}
      >
        ‹
      </button>
      <span data-testid="version-label">
        {shown + 1} / {count}
      </span>
      <button
        type="button"
        class="ghost small"
        aria-label="Next version"
        data-testid="next-version"
        disabled={!onShow || shown === count - 1}
        onClick={() => onShow?.(shown + 1)}
      >
        ›
      </button>
    </span>
  );
}

/** Characters of a long user message shown before "Show all". */
const FOLDED_CHARS = 1200;

/** A user message; a very long one (a pasted document) is folded to its start. */
function UserBody({ content }: { content: string }) {
  const [unfolded, setUnfolded] = useState(false);
  const long = content.length > FOLDED_CHARS * 1.5;
  if (!long || unfolded) return <div class="message-body plain">{content}</div>;
  return (
    <div class="message-body plain folded" data-testid="folded-message">
      {content.slice(0, FOLDED_CHARS)}…
      <button type="button" class="ghost small unfold" data-testid="unfold-message" onClick={() => setUnfolded(true)}>
        Show all {content.length.toLocaleString("en")} characters
      </button>
    </div>
  );
}

function AssistantBody({ content }: { content: string }) {
  // renderMarkdown escapes every piece of the model's text (see its tests).
  const html = useMemo(() => renderMarkdown(content), [content]);
  return (
    <div
      class="message-body markdown"
      onClick={(event) => {
        const button = (event.target as Element).closest("[data-copy-code]");
        const code = button?.closest(".code-block")?.querySelector("code");
        if (!button || !code) return;
        copyText(code.textContent ?? "").then(
          () => flash(button, "Copied"),
          () => flash(button, "Copy failed"),
        );
      }}
      dangerouslySetInnerHTML={{ __html: html }}
    />
  );
}

/**
 * A reply's reasoning, folded above its answer: "Thinking…" while the
 * model still reasons, then "Reasoning"; opening it shows the text.
 */
function Reasoning({ text, thinking }: { text: string; thinking: boolean }) {
  const words = text.trim() === "" ? 0 : text.trim().split(/\s+/).length;
  return (
    <details class="reasoning" data-testid="reasoning">
      <summary>
        {thinking ? "Thinking…" : "Reasoning"}
        <span class="reasoning-size">
          {" "}
          · {words} {words === 1 ? "word" : "words"}
        </span>
      </summary>
      <div class="reasoning-text" data-testid="reasoning-text">
        {text.trim()}
      </div>
    </details>
  );
}

/** Show a short confirmation on a copy button, then restore its label. */
function flash(button: Element, text: string) {
  button.textContent = text;
  setTimeout(() => (button.textContent = "Copy"), 1500);
}

function PromptReading({ progress }: { progress: PromptProgress }) {
  const label = `Reading the prompt: ${progress.read.toLocaleString("en")} of ${progress.total.toLocaleString("en")} tokens`;
  return (
    <div class="message-body prompt-progress" data-testid="prompt-progress" aria-live="polite">
      <span>{label}</span>
      <ProgressBar fraction={progress.total > 0 ? progress.read / progress.total : null} label="Reading the prompt" />
    </div>
  );
}

function StatsLine({ stats }: { stats: ReplyStats }) {
  return (
    <div class="reply-stats" data-testid="reply-stats">
      <span title="Time to first token">First token {formatSeconds(stats.ttft_s)}</span>
      {stats.load_s !== undefined ? (
        <span title="Loading the model, before the reply began" data-testid="load-note">
          after loading the model for {formatSeconds(stats.load_s)}
        </span>
      ) : null}
      <span title="Decoding speed">{formatTokensPerSecond(stats.decode_tok_s)}</span>
      {stats.decoded_together && stats.decoded_together > 1 ? (
        <span data-testid="together-note" title="Replies in progress at the same time share each decoding step">
          shared with {stats.decoded_together === 2 ? "1 other reply" : `${stats.decoded_together - 1} other replies`}
        </span>
      ) : null}
      <span>{stats.completion_tokens} tokens</span>
      {stopNote(stats.finish_reason) ? <span data-testid="stop-note">{stopNote(stats.finish_reason)}</span> : null}
      {stats.dropped_messages ? (
        <span data-testid="dropped-note" title="Left out so the rest fit the model's context">
          {stats.dropped_messages === 1 ? "1 oldest message" : `${stats.dropped_messages} oldest messages`} not read
        </span>
      ) : null}
    </div>
  );
}
