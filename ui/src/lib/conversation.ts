// Pure helpers for conversations: creating one, its title, and the message
// list a `chat` request sends. No I/O here, so they are easy to test.

import type { ChatMessage, Conversation, ModelEntry, Sampling, StoredMessage } from "../api/types";
import { randomId } from "./ids";

/**
 * Used for new conversations, and under a model's own recommendations on
 * its first reply (see `samplingFor`). A light repeat penalty keeps small
 * models from looping.
 */
export const DEFAULT_SAMPLING: Sampling = {
  temperature: 0.7,
  top_k: 0,
  top_p: 0.9,
  min_p: 0,
  repeat_penalty: 1.1,
  seed: 0,
};

/**
 * The sampling a conversation's next reply uses: the conversation's own,
 * except that a conversation still on the defaults takes the model's
 * recommendations when it starts (its first message).
 */
export function samplingFor(conversation: Conversation, model: ModelEntry | undefined): Sampling {
  const untouched = (Object.keys(DEFAULT_SAMPLING) as (keyof Sampling)[])
    .filter((key) => key !== "seed")
    .every((key) => conversation.sampling[key] === DEFAULT_SAMPLING[key]);
  const starting = conversation.messages.filter((m) => m.role !== "system").length <= 1;
  if (!untouched || !starting || !model?.sampling_defaults) return conversation.sampling;
  const recommended = Object.entries(model.sampling_defaults).filter(
    ([key, value]) => key !== "seed" && key in DEFAULT_SAMPLING && typeof value === "number",
  );
  return { ...conversation.sampling, ...Object.fromEntries(recommended) };
}

export const TITLE_LENGTH = 40;
export const UNTITLED = "New conversation";

export function newConversation(modelId: string | null, now = new Date()): Conversation {
  const stamp = now.toISOString();
  return {
    id: randomId(),
    title: "",
    title_set: false,
    model_id: modelId,
    system_prompt: "",
    sampling: { ...DEFAULT_SAMPLING },
    messages: [],
    created_at: stamp,
    updated_at: stamp,
  };
}

/**
 * Fill in what a stored conversation lacks (the server keeps whatever JSON
 * it was given, so older or hand-edited files may miss fields).
 */
export function normalizeConversation(stored: Partial<Conversation> & { id: string }): Conversation {
  const stamp = stored.updated_at ?? stored.created_at ?? new Date(0).toISOString();
  return {
    id: stored.id,
    title: typeof stored.title === "string" ? stored.title : "",
    title_set: stored.title_set === true,
    model_id: typeof stored.model_id === "string" ? stored.model_id : null,
    system_prompt: typeof stored.system_prompt === "string" ? stored.system_prompt : "",
    sampling: { ...DEFAULT_SAMPLING, ...stored.sampling },
    messages: Array.isArray(stored.messages) ? stored.messages.map(withValidVersions) : [],
    ...(stored.auto_read === true ? { auto_read: true } : {}),
    created_at: stored.created_at ?? stamp,
    updated_at: stamp,
  };
}

/** What names a conversation's reply at `index` (which reply is being read aloud). */
export function replyKey(conversationId: string, index: number): string {
  return `${conversationId}:${index}`;
}

/** `message` without its versions record if that record is malformed (a hand-edited file). */
function withValidVersions(message: StoredMessage): StoredMessage {
  const versions = message.alternatives;
  if (versions === undefined) return message;
  const valid =
    Array.isArray(versions.others) &&
    versions.others.every((tail) => Array.isArray(tail) && tail.length > 0) &&
    Number.isInteger(versions.position) &&
    versions.position >= 0 &&
    versions.position <= versions.others.length;
  if (valid) return message;
  const { alternatives: _dropped, ...plain } = message;
  return plain;
}

/** The first user message on one line, cut to about 40 characters. */
export function titleFrom(text: string): string {
  const line = text.replace(/\s+/g, " ").trim();
  if (line.length <= TITLE_LENGTH) return line;
  const cut = line.slice(0, TITLE_LENGTH);
  const space = cut.lastIndexOf(" ");
  return `${(space > TITLE_LENGTH / 2 ? cut.slice(0, space) : cut).trimEnd()}…`;
}

/** The title to save: the user's name for it, else the first user message (also when that is edited). */
export function savedTitle(conversation: Conversation): string {
  if (conversation.title_set) return conversation.title;
  const firstUser = conversation.messages.find((m) => m.role === "user");
  return firstUser ? titleFrom(firstUser.content) : conversation.title;
}

/** A name typed by the user, on one line and at most this long. */
export const MAX_TITLE_LENGTH = 120;

/** The title to show: stored title, else the first user message, else a placeholder. */
export function displayTitle(conversation: Pick<Conversation, "title"> & Partial<Conversation>): string {
  if (conversation.title.trim() !== "") return conversation.title;
  const firstUser = conversation.messages?.find((m) => m.role === "user");
  return firstUser ? titleFrom(firstUser.content) : UNTITLED;
}

/**
 * What `chat` receives: the system prompt (if any), then the messages
 * without stats; a reply's reasoning goes along for the template to keep
 * or leave out, and a user's pictures by their ids.
 */
export function requestMessages(conversation: Conversation): ChatMessage[] {
  const messages: ChatMessage[] = conversation.messages.map(({ role, content, reasoning, pictures }) => ({
    role,
    content,
    ...(reasoning === undefined ? {} : { reasoning_content: reasoning }),
    ...(pictures && pictures.length > 0 ? { pictures } : {}),
  }));
  const system = conversation.system_prompt.trim();
  return system === "" ? messages : [{ role: "system", content: conversation.system_prompt }, ...messages];
}
