// Generating replies: send a message, stream the reply token by token, stop
// it (keeping what arrived), regenerate any reply or edit an earlier user
// message and resend (either keeps the versions it replaces, see
// lib/alternatives.ts). The conversation is saved after every reply,
// completed, stopped or failed. A conversation too long for the model's
// context is not an error toast: it is kept as an overflow the chat shows
// under the last message, with a way to send it without its oldest turns.

import type { Api } from "../api/commands";
import { StreamError } from "../transport";
import type { Conversation, ReplyVersions, StoredMessage } from "../api/types";
import { replaceFrom, showVersion as withVersionShown } from "../lib/alternatives";
import { requestMessages, samplingFor } from "../lib/conversation";
import { randomSeed } from "../lib/ids";
import type { Store } from "./store";
import { effectiveModelId, type AppState } from "./app-state";
import type { ConversationActions } from "./conversations";
import type { Notices } from "./notices";

/** `onReply`: called with each reply made whole (not stopped), its conversation and its index. */
export function createChatActions(
  store: Store<AppState>,
  api: Api,
  notices: Notices,
  conversations: ConversationActions,
  onReply: (conversationId: string, index: number, text: string) => void = () => {},
) {
  let stopController: AbortController | null = null;

  function busy(): boolean {
    return store.get().generatingId !== null;
  }

  function selected(): Conversation | null {
    const id = store.get().selectedId;
    return id === null ? null : conversations.get(id);
  }

  /** The model to chat with; reports the problem and returns null if there is none. */
  function modelFor(conversation: Conversation): string | null {
    const modelId = effectiveModelId(store.get(), conversation);
    if (modelId === null) notices.report(new Error("Choose a model first: open Models to download or import one."));
    return modelId;
  }

  /**
   * Stream a reply to the conversation's messages, which must end with a
   * user message. `dropOldestTurns` lets the engine leave out the oldest
   * turns that do not fit the context (and once a reply was made that way,
   * every later one in the conversation is). A regenerated reply carries
   * the `versions` it replaces, and `previous`, the messages it replaced,
   * come back if no reply is kept (stopped or failed before any text).
   */
  async function generate(
    id: string,
    { dropOldestTurns = false, versions, previous }: GenerateOptions = {},
  ): Promise<void> {
    const state = store.get();
    const conversation = conversations.get(id);
    if (!conversation || busy()) return;
    const modelId = modelFor(conversation);
    if (modelId === null) return;
    const chosen = samplingFor(
      conversation,
      state.models.find((m) => m.id === modelId),
    );
    const sampling = state.prefs.freshSeed ? { ...chosen, seed: randomSeed() } : chosen;
    const asked: Conversation = { ...conversation, model_id: modelId, sampling };
    conversations.update(id, { model_id: modelId, sampling });

    const history = asked.messages;
    const dropOldest = dropOldestTurns || history.some((message) => (message.stats?.dropped_messages ?? 0) > 0);
    let reply: StoredMessage = { role: "assistant", content: "", ...(versions ? { alternatives: versions } : {}) };
    const show = () => conversations.update(id, { messages: [...history, reply] });
    show();

    const controller = new AbortController();
    stopController = controller;
    store.update({ generatingId: id, overflow: null, promptProgress: null });
    try {
      const stats = await api.chat(
        {
          model_id: modelId,
          messages: requestMessages(asked),
          sampling,
          max_tokens: state.prefs.maxTokens,
          ...(state.prefs.contextLength === null ? {} : { context_length: state.prefs.contextLength }),
          ...(dropOldest ? { drop_oldest_turns: true } : {}),
        },
        (text, part) => {
          if (store.get().promptProgress) store.update({ promptProgress: null });
          reply =
            part === "answer"
              ? { ...reply, content: reply.content + text }
              : { ...reply, reasoning: (reply.reasoning ?? "") + text };
          show();
        },
        controller.signal,
        (message) => notices.report(new Error(message)),
        (progress) => store.update({ promptProgress: { read: progress.read_tokens, total: progress.prompt_tokens } }),
      );
      reply = { ...reply, stats };
      store.update({ loadedModelId: modelId }); // `chat` loads the model it needs
    } catch (error) {
      if (controller.signal.aborted) reply = { ...reply, stopped: true };
      const tooLong =
        error instanceof StreamError && ["prompt_too_long", "last_turn_too_long"].includes(error.kind ?? "");
      if (tooLong) {
        const canDropOldest = (error as StreamError).kind === "prompt_too_long" && !dropOldest;
        store.update({ overflow: { conversationId: id, message: (error as Error).message, canDropOldest } });
      } else {
        notices.report(error); // a stop is not reported
      }
    } finally {
      stopController = null;
      // A reply stopped or failed before its first token leaves no empty
      // bubble; one the model ended at once (its stats say so) is kept.
      const keep = reply.content !== "" || reply.reasoning !== undefined || reply.stats !== undefined;
      conversations.update(id, { messages: keep ? [...history, reply] : (previous ?? history) });
      store.update({ generatingId: null, promptProgress: null });
    }
    await conversations.save(id);
    if (reply.stats !== undefined && !reply.stopped && reply.content.trim() !== "") {
      onReply(id, history.length, reply.content);
    }
  }

  /**
   * Send a user message, its text and the ids of the pictures it shows, in
   * the selected conversation. Resolves false (and leaves the conversation
   * as it was) when it cannot be sent.
   */
  async function send(text: string, pictures: string[] = []): Promise<boolean> {
    const conversation = selected();
    if (!conversation || busy() || (text.trim() === "" && pictures.length === 0)) return false;
    if (modelFor(conversation) === null) return false;
    const message: StoredMessage = { role: "user", content: text, ...(pictures.length > 0 ? { pictures } : {}) };
    conversations.update(conversation.id, { messages: [...conversation.messages, message] });
    await generate(conversation.id);
    return true;
  }

  /**
   * Make the reply at `index` (by default the last message, or answer a
   * last user message left without a reply) again. The version it replaces,
   * that reply and everything after it, is kept and can be shown again.
   */
  async function regenerate(index?: number): Promise<void> {
    const conversation = selected();
    if (!conversation || busy() || modelFor(conversation) === null) return;
    const messages = conversation.messages;
    const at = index ?? messages.length - 1;
    if (index === undefined && messages[at]?.role === "user") {
      await generate(conversation.id);
      return;
    }
    if (messages[at]?.role !== "assistant" || messages[at - 1]?.role !== "user") return;
    const { before, versions } = replaceFrom(messages, at);
    conversations.update(conversation.id, { messages: before });
    await generate(conversation.id, { versions, previous: messages });
  }

  /** Show version `wanted` (0-based) of the conversation from the reply at `index`. */
  async function showVersion(index: number, wanted: number): Promise<void> {
    const conversation = selected();
    if (!conversation || busy()) return;
    const messages = withVersionShown(conversation.messages, index, wanted);
    if (messages === conversation.messages) return;
    conversations.update(conversation.id, { messages });
    await conversations.save(conversation.id);
  }

  /**
   * Change the user message at `index` and resend. As a regeneration does,
   * this starts a new version of the conversation from that message: the
   * old one (the message as it was and everything after it) is kept on the
   * edited message and can be shown again.
   */
  async function editAndResend(index: number, text: string): Promise<void> {
    const conversation = selected();
    const original = conversation?.messages[index];
    if (!conversation || busy() || original?.role !== "user") return;
    // The message's pictures stay: only its text was edited.
    const pictures = original.pictures;
    if (text.trim() === "" && !pictures?.length) return;
    if (modelFor(conversation) === null) return;
    const { before, versions } = replaceFrom(conversation.messages, index);
    const edited: StoredMessage = {
      role: "user",
      content: text,
      ...(pictures && pictures.length > 0 ? { pictures } : {}),
      ...(versions ? { alternatives: versions } : {}),
    };
    conversations.update(conversation.id, { messages: [...before, edited] });
    await conversations.save(conversation.id);
    await generate(conversation.id);
  }

  /** Answer the selected conversation's last message, leaving out the oldest turns that do not fit. */
  async function sendWithoutOldestTurns(): Promise<void> {
    const conversation = selected();
    if (!conversation || busy() || conversation.messages.at(-1)?.role !== "user") return;
    await generate(conversation.id, { dropOldestTurns: true });
  }

  /** Stop the reply being generated; the text so far is kept. */
  function stop(): void {
    stopController?.abort();
  }

  return { send, regenerate, showVersion, editAndResend, sendWithoutOldestTurns, stop };
}

interface GenerateOptions {
  dropOldestTurns?: boolean;
  versions?: ReplyVersions;
  previous?: StoredMessage[];
}

export type ChatActions = ReturnType<typeof createChatActions>;
