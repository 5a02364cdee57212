// Actions on conversations: restore them at start, create, open, change
// settings, save through `save_conversation`, and delete.

import type { Api } from "../api/commands";
import type { Conversation, ConversationMatch } from "../api/types";
import { MAX_TITLE_LENGTH, newConversation, normalizeConversation, savedTitle } from "../lib/conversation";
import { downloadBytes } from "../lib/download";
import { EXPORT_TYPES, exportFileName, exportText, type ExportFormat } from "../lib/export";
import type { Store } from "./store";
import { isSaved, type AppState } from "./app-state";
import type { Notices } from "./notices";
import { loadLastConversation, saveLastConversation, type KeyValueStorage } from "./prefs";

/** Settings edits are saved this long after the last keystroke. */
const SETTINGS_SAVE_DELAY_MS = 600;

/** What the settings panel may change on a conversation. */
export type ConversationSettings = Partial<Pick<Conversation, "model_id" | "system_prompt" | "sampling" | "auto_read">>;

export function createConversationActions(
  store: Store<AppState>,
  api: Api,
  notices: Notices,
  storage: KeyValueStorage | null,
) {
  const pendingSaves = new Map<string, ReturnType<typeof setTimeout>>();
  /** Per conversation: the last save asked for (in flight or queued), and the one queued, not yet started. */
  const lastSave = new Map<string, Promise<void>>();
  const queuedSave = new Map<string, Promise<void>>();

  function put(conversation: Conversation): void {
    store.update((state) => ({ conversations: { ...state.conversations, [conversation.id]: conversation } }));
  }

  function get(id: string): Conversation | null {
    return store.get().conversations[id] ?? null;
  }

  function select(id: string | null): void {
    store.update({ selectedId: id, view: "chat" });
    saveLastConversation(storage, id);
  }

  /** Load the sidebar list and reopen the last conversation (or the newest). */
  async function restore(): Promise<void> {
    try {
      const { conversations } = await api.listConversations();
      store.update({ summaries: conversations });
      const last = loadLastConversation(storage);
      const pick = conversations.find((c) => c.id === last) ?? conversations[0];
      if (pick && (await open(pick.id))) return;
    } catch (error) {
      notices.report(error);
    }
    create();
  }

  /** Show a conversation, fetching it first if needed; false if it could not be fetched. */
  async function open(id: string): Promise<boolean> {
    if (!get(id)) {
      try {
        put(normalizeConversation(await api.getConversation(id)));
      } catch (error) {
        notices.report(error);
        return false;
      }
    }
    select(id);
    return true;
  }

  /** Start a new conversation (reusing the current one if it is still empty). */
  function create(): void {
    const current = store.get().selectedId;
    const draft = current === null ? null : get(current);
    if (draft && draft.messages.length === 0 && !isSaved(store.get(), draft.id)) {
      select(draft.id);
      return;
    }
    const conversation = newConversation(null);
    put(conversation);
    select(conversation.id);
  }

  /** Change a conversation in memory only. */
  function update(id: string, patch: Partial<Omit<Conversation, "id">>): void {
    const conversation = get(id);
    if (conversation) put({ ...conversation, ...patch });
  }

  /** Change a conversation's settings; saved conversations are saved shortly after. */
  function change(id: string, settings: ConversationSettings): void {
    update(id, settings);
    if (!isSaved(store.get(), id)) return;
    clearTimeout(pendingSaves.get(id));
    pendingSaves.set(
      id,
      setTimeout(() => {
        // While a reply streams, the save after the reply covers this change.
        if (store.get().generatingId !== id) void save(id);
      }, SETTINGS_SAVE_DELAY_MS),
    );
  }

  /**
   * Run `send` (which must not reject) once the save of conversation `id` in
   * flight, if any, is done. Overlapping saves could reach the server out of
   * order and let an older state win. Requests made meanwhile share one queued
   * run, which sends the state current when it starts.
   */
  function oneSaveAtATime(id: string, send: () => Promise<void>): Promise<void> {
    const queued = queuedSave.get(id);
    if (queued) return queued;
    const previous = lastSave.get(id);
    const start = () => {
      queuedSave.delete(id);
      return send();
    };
    const task = previous ? previous.then(start) : start();
    if (previous) queuedSave.set(id, task);
    lastSave.set(id, task);
    void task.then(() => {
      if (lastSave.get(id) === task) lastSave.delete(id);
    });
    return task;
  }

  /** Write a conversation to the server and move it to the top of the sidebar. */
  function save(id: string): Promise<void> {
    clearTimeout(pendingSaves.get(id));
    pendingSaves.delete(id);
    return oneSaveAtATime(id, async () => {
      const current = get(id);
      if (!current) return; // deleted (or never there): nothing to save
      const conversation: Conversation = {
        ...current,
        title: savedTitle(current),
        updated_at: new Date().toISOString(),
      };
      put(conversation);
      try {
        await api.saveConversation(conversation);
        if (!get(id)) return; // deleted while in flight: it stays off the sidebar
        const summary = { id, title: conversation.title, updated_at: conversation.updated_at };
        store.update((state) => ({
          summaries: [summary, ...state.summaries.filter((s) => s.id !== id)],
        }));
      } catch (error) {
        notices.report(error);
      }
    });
  }

  /** Delete a conversation. It leaves the screen at once and comes back if the server refuses. */
  async function remove(id: string): Promise<void> {
    clearTimeout(pendingSaves.get(id));
    pendingSaves.delete(id);
    const before = store.get();
    const wasSaved = isSaved(before, id) || lastSave.has(id);
    store.update((state) => {
      const conversations = { ...state.conversations };
      delete conversations[id];
      return {
        conversations,
        summaries: state.summaries.filter((s) => s.id !== id),
        selectedId: state.selectedId === id ? null : state.selectedId,
      };
    });
    if (before.selectedId === id) {
      const next = store.get().summaries[0];
      if (next) void open(next.id).then((opened) => opened || create());
      else create();
    }
    if (!wasSaved) return;
    try {
      // After the save in flight, so that it cannot bring the conversation
      // back; saves queued behind it find it gone and send nothing.
      await lastSave.get(id);
      await api.deleteConversation(id);
    } catch (error) {
      notices.report(error);
      store.update((state) => ({
        conversations: { ...state.conversations, ...pick(before.conversations, id) },
        summaries: newestFirst([...state.summaries, ...before.summaries.filter((s) => s.id === id)]),
      }));
    }
  }

  /** Name a conversation (an empty name gives the title back to its first message) and save it. */
  async function rename(id: string, name: string): Promise<void> {
    const title = name.replace(/\s+/g, " ").trim().slice(0, MAX_TITLE_LENGTH);
    update(id, title === "" ? { title: "", title_set: false } : { title, title_set: true });
    await save(id);
  }

  /** Conversations containing `query`; none (and the reason shown) if the search fails. */
  async function search(query: string): Promise<ConversationMatch[]> {
    try {
      return (await api.searchConversations(query)).conversations;
    } catch (error) {
      notices.report(error);
      return [];
    }
  }

  /** Save a conversation as a Markdown or JSON file (a download). */
  async function exportAs(id: string, format: ExportFormat): Promise<void> {
    try {
      const conversation = get(id) ?? normalizeConversation(await api.getConversation(id));
      const bytes = new TextEncoder().encode(exportText(conversation, format));
      downloadBytes(bytes, exportFileName(conversation, format), EXPORT_TYPES[format]);
    } catch (error) {
      notices.report(error);
    }
  }

  return { restore, open, create, update, change, save, remove, get, rename, search, exportAs };
}

export type ConversationActions = ReturnType<typeof createConversationActions>;

function pick<T>(record: Record<string, T>, key: string): Record<string, T> {
  return key in record ? { [key]: record[key] } : {};
}

function newestFirst<T extends { updated_at: string }>(items: T[]): T[] {
  return [...items].sort((a, b) => Date.parse(b.updated_at) - Date.parse(a.updated_at));
}
