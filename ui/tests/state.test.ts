// Tests for the state logic (models, conversations, chat) against a fake Api.

import { describe, expect, it, vi } from "vitest";
import { createCake } from "../src/state";
import { selectedConversation } from "../src/state/app-state";
import { newConversation } from "../src/lib/conversation";
import type { Api } from "../src/api/commands";
import type { Conversation } from "../src/api/types";
import { StreamError } from "../src/transport";
import { STATS, createFakeApi, memoryStorage, model, replyUntilStopped, replyWith } from "./fake-api";
import { HUB_UNREACHABLE_MESSAGE } from "../src/lib/errors";

async function started(setup: Parameters<typeof createFakeApi>[0] = { models: [model("m1")] }) {
  const { api, server } = createFakeApi(setup);
  const storage = memoryStorage();
  const cake = createCake(api, storage);
  await cake.start();
  return { cake, api, server, storage, state: () => cake.store.get() };
}

function saved(id: string, title: string, updatedAt: string, extra: Partial<Conversation> = {}): Conversation {
  return { ...newConversation("m1"), id, title, updated_at: updatedAt, ...extra };
}

/**
 * Makes the fake server hold each save until the test lets it through
 * (`release`, oldest first), and counts how many are in flight at once.
 */
function heldSaves(api: Api, server: ReturnType<typeof createFakeApi>["server"]) {
  const waiting: (() => void)[] = [];
  let inFlight = 0;
  let mostInFlight = 0;
  vi.mocked(api.saveConversation).mockImplementation(async (conversation) => {
    mostInFlight = Math.max(mostInFlight, ++inFlight);
    await new Promise<void>((resolve) => waiting.push(resolve));
    server.conversations.set(conversation.id, structuredClone(conversation));
    inFlight--;
    return {};
  });
  return {
    release: () => waiting.shift()!(),
    mostInFlight: () => mostInFlight,
    sent: () => vi.mocked(api.saveConversation).mock.calls.map(([conversation]) => conversation),
  };
}

describe("start", () => {
  it("opens a new conversation when there is none", async () => {
    const { state } = await started();
    expect(state().modelsReady).toBe(true);
    expect(state().summaries).toEqual([]);
    expect(selectedConversation(state())?.messages).toEqual([]);
  });

  it("restores the newest conversation from the server", async () => {
    const older = saved("old", "Old", "2024-01-01T00:00:00Z");
    const newer = saved("new", "New", "2024-02-01T00:00:00Z", {
      messages: [
        { role: "user", content: "hi" },
        { role: "assistant", content: "hello", stats: STATS },
      ],
    });
    const { state } = await started({ models: [model("m1")], conversations: [older, newer] });
    expect(state().summaries.map((s) => s.id)).toEqual(["new", "old"]);
    expect(selectedConversation(state())?.messages).toHaveLength(2);
  });

  it("reopens the conversation that was open last", async () => {
    const a = saved("a", "A", "2024-01-01T00:00:00Z");
    const b = saved("b", "B", "2024-02-01T00:00:00Z");
    const { api } = createFakeApi({ conversations: [a, b] });
    const storage = memoryStorage();
    storage.setItem("cake.lastConversation", "a");
    const cake = createCake(api, storage);
    await cake.start();
    expect(cake.store.get().selectedId).toBe("a");
  });
});

describe("chat", () => {
  it("streams a reply, stores its stats and saves with a title", async () => {
    const { cake, api, server, state } = await started();
    const id = state().selectedId!;
    cake.conversations.change(id, { system_prompt: "Be brief." });
    await cake.chat.send("What is Cake, in one long sentence please?");

    const conversation = selectedConversation(state())!;
    expect(conversation.messages).toEqual([
      { role: "user", content: "What is Cake, in one long sentence please?" },
      { role: "assistant", content: "Hello there", stats: STATS },
    ]);
    expect(state().generatingId).toBeNull();

    const request = vi.mocked(api.chat).mock.calls[0][0];
    expect(request.model_id).toBe("m1");
    expect(request.messages).toEqual([
      { role: "system", content: "Be brief." },
      { role: "user", content: "What is Cake, in one long sentence please?" },
    ]);
    expect(request.max_tokens).toBe(state().prefs.maxTokens);

    const stored = server.conversations.get(id)!;
    expect(stored.title).toBe("What is Cake, in one long sentence…");
    expect(stored.model_id).toBe("m1");
    expect(stored.messages).toHaveLength(2);
    expect(state().summaries[0].id).toBe(id);
  });

  it("shows tokens as they arrive", async () => {
    const { cake, server, state } = await started();
    const seen: string[] = [];
    server.chatScript = async (_request, onToken) => {
      onToken("a", "answer");
      seen.push(selectedConversation(state())!.messages.at(-1)!.content);
      onToken("b", "answer");
      seen.push(selectedConversation(state())!.messages.at(-1)!.content);
      return STATS;
    };
    await cake.chat.send("hi");
    expect(seen).toEqual(["a", "ab"]);
  });

  it("keeps a reply's reasoning apart from its answer, and sends it back", async () => {
    const { cake, api, server, state } = await started();
    server.chatScript = async (_request, onToken) => {
      onToken("Two and ", "reasoning");
      onToken("two.", "reasoning");
      onToken("Four.", "answer");
      return STATS;
    };
    await cake.chat.send("2+2?");
    const reply = selectedConversation(state())!.messages.at(-1)!;
    expect(reply).toMatchObject({ role: "assistant", content: "Four.", reasoning: "Two and two." });
    expect(server.conversations.get(state().selectedId!)!.messages.at(-1)!.reasoning).toBe("Two and two.");

    server.chatScript = replyWith("Yes.");
    await cake.chat.send("Sure?");
    const request = vi.mocked(api.chat).mock.calls.at(-1)![0];
    expect(request.messages[1]).toEqual({ role: "assistant", content: "Four.", reasoning_content: "Two and two." });
  });

  it("keeps the partial reply when stopped, and saves it", async () => {
    const { cake, server, state } = await started();
    server.chatScript = replyUntilStopped("Par", "tial");
    const sending = cake.chat.send("hi");
    await Promise.resolve();
    expect(state().generatingId).not.toBeNull();
    cake.chat.stop();
    await sending;
    const messages = selectedConversation(state())!.messages;
    expect(messages.at(-1)).toEqual({ role: "assistant", content: "Partial", stopped: true });
    expect(state().notices).toEqual([]);
    expect(server.conversations.get(state().selectedId!)!.messages).toHaveLength(2);
  });

  it("shows how far a long prompt has been read until the first token", async () => {
    const { cake, server, state } = await started();
    const seen: unknown[] = [];
    server.chatScript = async (_request, onToken, _signal, onPromptProgress) => {
      onPromptProgress?.({ type: "progress", read_tokens: 0, prompt_tokens: 1000 });
      onPromptProgress?.({ type: "progress", read_tokens: 512, prompt_tokens: 1000 });
      seen.push(state().promptProgress);
      onToken("a", "answer");
      seen.push(state().promptProgress);
      return STATS;
    };
    await cake.chat.send("a long message");
    expect(seen).toEqual([{ read: 512, total: 1000 }, null]);
  });

  it("offers no dropping of turns when the last message alone does not fit", async () => {
    const { cake, server, state } = await started();
    const alone = "the last message alone (with the system prompt) has 700 tokens but the context length is 512";
    server.chatScript = async () => {
      throw new StreamError(alone, "last_turn_too_long");
    };
    await cake.chat.send("a very long message");
    expect(state().overflow).toEqual({ conversationId: state().selectedId!, message: alone, canDropOldest: false });
    expect(state().notices).toEqual([]);
  });

  it("keeps an over-long conversation with a way to send it without its oldest turns", async () => {
    const { cake, api, server, state } = await started();
    const tooLong = "the prompt has 900 tokens but the model's context length is 512";
    server.chatScript = async () => {
      throw new StreamError(tooLong, "prompt_too_long");
    };
    await cake.chat.send("a long message");
    const id = state().selectedId!;
    expect(state().overflow).toEqual({ conversationId: id, message: tooLong, canDropOldest: true });
    expect(state().notices).toEqual([]);
    expect(selectedConversation(state())!.messages).toEqual([{ role: "user", content: "a long message" }]);

    server.chatScript = async (_request, onToken) => {
      onToken("short", "answer");
      return { ...STATS, dropped_messages: 2 };
    };
    await cake.chat.sendWithoutOldestTurns();
    expect(vi.mocked(api.chat).mock.calls[1][0].drop_oldest_turns).toBe(true);
    expect(state().overflow).toBeNull();
    expect(selectedConversation(state())!.messages.at(-1)!.stats?.dropped_messages).toBe(2);

    // The conversation keeps leaving out what does not fit; when even that
    // fails, there is nothing more to offer.
    server.chatScript = async () => {
      throw new StreamError("the last message alone does not fit", "last_turn_too_long");
    };
    await cake.chat.send("another");
    expect(vi.mocked(api.chat).mock.calls[2][0].drop_oldest_turns).toBe(true);
    expect(state().overflow?.canDropOldest).toBe(false);
  });

  it("drops an empty reply when stopped before the first token", async () => {
    const { cake, server, state } = await started();
    server.chatScript = replyUntilStopped();
    const sending = cake.chat.send("hi");
    cake.chat.stop();
    await sending;
    expect(selectedConversation(state())!.messages).toEqual([{ role: "user", content: "hi" }]);
  });

  it("reports a failure and keeps the user's message", async () => {
    const { cake, server, state } = await started();
    server.chatScript = async () => {
      throw new Error("model crashed");
    };
    await cake.chat.send("hi");
    expect(state().notices.map((n) => n.message)).toEqual(["model crashed"]);
    expect(selectedConversation(state())!.messages).toEqual([{ role: "user", content: "hi" }]);
    expect(state().generatingId).toBeNull();
  });

  it("regenerates the last reply", async () => {
    const { cake, server, state } = await started();
    await cake.chat.send("hi");
    server.chatScript = replyWith("Another");
    await cake.chat.regenerate();
    expect(selectedConversation(state())!.messages.map((m) => m.content)).toEqual(["hi", "Another"]);
  });

  it("regenerates an earlier reply and keeps the version it replaced", async () => {
    const { cake, server, state } = await started();
    await cake.chat.send("first");
    await cake.chat.send("second");
    server.chatScript = replyWith("Another first answer");
    await cake.chat.regenerate(1);
    const id = state().selectedId!;
    expect(selectedConversation(state())!.messages.map((m) => m.content)).toEqual(["first", "Another first answer"]);
    await cake.chat.showVersion(1, 0);
    expect(selectedConversation(state())!.messages.map((m) => m.content)).toEqual([
      "first",
      "Hello there",
      "second",
      "Hello there",
    ]);
    // Saved as shown, with the other version kept.
    const stored = server.conversations.get(id)!;
    expect(stored.messages).toHaveLength(4);
    expect(stored.messages[1].alternatives?.others[0].map((m) => m.content)).toEqual(["Another first answer"]);
  });

  it("puts the replaced version back when a regenerated reply fails before any text", async () => {
    const { cake, server, state } = await started();
    await cake.chat.send("first");
    server.chatScript = async () => {
      throw new Error("model crashed");
    };
    await cake.chat.regenerate(1);
    expect(selectedConversation(state())!.messages.map((m) => m.content)).toEqual(["first", "Hello there"]);
    expect(selectedConversation(state())!.messages[1].alternatives).toBeUndefined();
  });

  it("edits a user message into a new version and keeps the old one with all its turns", async () => {
    const { cake, server, state } = await started();
    await cake.chat.send("first");
    await cake.chat.send("second");
    server.chatScript = replyWith("Another second answer");
    await cake.chat.regenerate(3); // the last reply now has two versions
    server.chatScript = replyWith("Edited answer");
    await cake.chat.editAndResend(0, "first, edited");
    const contents = () => selectedConversation(state())!.messages.map((m) => m.content);
    expect(contents()).toEqual(["first, edited", "Edited answer"]);
    const id = state().selectedId!;
    expect(server.conversations.get(id)!.messages[0].alternatives?.others[0].map((m) => m.content)).toEqual([
      "first",
      "Hello there",
      "second",
      "Another second answer",
    ]);
    // Switching back restores every later turn, the reply's own versions too.
    await cake.chat.showVersion(0, 0);
    expect(contents()).toEqual(["first", "Hello there", "second", "Another second answer"]);
    expect(selectedConversation(state())!.messages[3].alternatives?.others[0][0].content).toBe("Hello there");
    await cake.chat.showVersion(0, 1);
    expect(contents()).toEqual(["first, edited", "Edited answer"]);
  });

  it("asks for a model when none is usable", async () => {
    const { cake, api, state } = await started({ models: [model("broken", { status: "incomplete" })] });
    await cake.chat.send("hi");
    expect(api.chat).not.toHaveBeenCalled();
    expect(state().notices[0].message).toMatch(/Choose a model/);
  });

  it("uses a fresh seed per reply unless told otherwise", async () => {
    const { cake, api } = await started();
    cake.setPrefs({ freshSeed: false });
    await cake.chat.send("a");
    await cake.chat.send("b");
    const calls = vi.mocked(api.chat).mock.calls;
    expect(calls[0][0].sampling.seed).toBe(calls[1][0].sampling.seed);
  });
});

describe("pictures", () => {
  const PNG = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 1, 2, 3]);
  const withReader = () => started({ models: [model("m1", { reads_pictures: true })] });

  it("are refused at once for a model that reads text only", async () => {
    const { cake, api, state } = await started({ models: [model("m1", { name: "SmolLM2" })] });
    await cake.pictures.attachFiles([new File([PNG], "cat.png", { type: "image/png" })]);
    expect(api.addPicture).not.toHaveBeenCalled();
    expect(state().attached).toEqual([]);
    expect(state().notices[0].message).toMatch(/^SmolLM2 reads text only/);
  });

  it("are kept when attached, go with the message by id, and stay when its text is edited", async () => {
    const { cake, api, server, state } = await withReader();
    await cake.pictures.attachFiles([new File([PNG], "cat.png", { type: "image/png" })]);
    const [attached] = state().attached;
    expect(attached.name).toBe("cat.png");
    expect(server.pictures.has(attached.id!)).toBe(true);
    expect(await cake.pictures.thumbnail(attached.id!)).toMatch(/^data:image\/jpeg;base64,/);

    const pictures = cake.pictures.takeAll().map((p) => p.id!);
    expect(state().attached).toEqual([]);
    await cake.chat.send("What is this?", pictures);
    const request = vi.mocked(api.chat).mock.calls[0][0];
    expect(request.messages).toEqual([{ role: "user", content: "What is this?", pictures }]);
    const id = state().selectedId!;
    expect(server.conversations.get(id)!.messages[0].pictures).toEqual(pictures);

    await cake.chat.editAndResend(0, "And now?");
    expect(vi.mocked(api.chat).mock.calls[1][0].messages).toEqual([{ role: "user", content: "And now?", pictures }]);
  });

  it("a message of pictures alone is sent; a file that is not a picture is refused and dropped", async () => {
    const { cake, api, state } = await withReader();
    await cake.pictures.attachFiles([
      new File([PNG], "cat.png", { type: "image/png" }),
      new File(["shopping list"], "notes.txt", { type: "text/plain" }),
    ]);
    expect(state().attached.map((p) => p.name)).toEqual(["cat.png"]);
    expect(state().notices[0].message).toMatch(/notes\.txt: not a PNG/);
    const pictures = cake.pictures.takeAll().map((p) => p.id!);
    expect(await cake.chat.send("", pictures)).toBe(true);
    expect(vi.mocked(api.chat).mock.calls[0][0].messages).toEqual([{ role: "user", content: "", pictures }]);
    expect(await cake.chat.send("", [])).toBe(false);
  });

  it("taken for a message that was not sent come back before newer ones", async () => {
    const { cake, state } = await withReader();
    await cake.pictures.attachFiles([new File([PNG], "a.png", { type: "image/png" })]);
    const taken = cake.pictures.takeAll();
    await cake.pictures.attachFiles([new File([PNG, PNG], "b.png", { type: "image/png" })]);
    cake.pictures.restore(taken);
    expect(state().attached.map((p) => p.name)).toEqual(["a.png", "b.png"]);
    cake.pictures.remove(state().attached[0].key);
    expect(state().attached.map((p) => p.name)).toEqual(["b.png"]);
  });
});

describe("conversations", () => {
  it("does not pile up empty new conversations", async () => {
    const { cake, state } = await started();
    const first = state().selectedId;
    cake.conversations.create();
    expect(state().selectedId).toBe(first);
  });

  it("keeps a name the user gave through later turns, and gives the title back when the name is cleared", async () => {
    const { cake, server, state } = await started();
    await cake.chat.send("How do I feed a sourdough starter?");
    const id = state().selectedId!;
    await cake.conversations.rename(id, "  Bread\n  notes ");
    expect(server.conversations.get(id)).toMatchObject({ title: "Bread notes", title_set: true });
    await cake.chat.send("And how often?");
    expect(server.conversations.get(id)?.title).toBe("Bread notes");
    expect(state().summaries[0]).toMatchObject({ id, title: "Bread notes" });
    await cake.conversations.rename(id, "   ");
    expect(server.conversations.get(id)).toMatchObject({
      title: "How do I feed a sourdough starter?",
      title_set: false,
    });
  });

  it("searches the saved conversations", async () => {
    const a = saved("a", "Bread", "2024-01-01T00:00:00Z", { messages: [{ role: "user", content: "Rye or wheat?" }] });
    const b = saved("b", "Cake", "2024-02-01T00:00:00Z");
    const { cake, api } = await started({ conversations: [a, b] });
    expect((await cake.conversations.search("RYE")).map((m) => m.id)).toEqual(["a"]);
    expect(api.searchConversations).toHaveBeenCalledWith("RYE");
  });

  it("deletes a conversation and opens the next one", async () => {
    const a = saved("a", "A", "2024-01-01T00:00:00Z");
    const b = saved("b", "B", "2024-02-01T00:00:00Z");
    const { cake, server, state } = await started({ conversations: [a, b] });
    expect(state().selectedId).toBe("b");
    await cake.deleteConversation("b");
    expect(server.conversations.has("b")).toBe(false);
    expect(state().summaries.map((s) => s.id)).toEqual(["a"]);
    await Promise.resolve();
    expect(state().selectedId).toBe("a");
  });

  it("saves one conversation one save at a time, the last with the latest state", async () => {
    const { cake, api, server } = await started({ conversations: [saved("a", "A", "2024-01-01T00:00:00Z")] });
    const saves = heldSaves(api, server);
    cake.conversations.update("a", { system_prompt: "first" });
    const first = cake.conversations.save("a");
    cake.conversations.update("a", { system_prompt: "second" });
    const second = cake.conversations.save("a");
    expect(saves.sent()).toHaveLength(1); // the second waits for the first
    saves.release();
    await first;
    await vi.waitFor(() => expect(saves.sent()).toHaveLength(2));
    saves.release();
    await second;
    expect(saves.mostInFlight()).toBe(1);
    expect(saves.sent().map((c) => c.system_prompt)).toEqual(["first", "second"]);
    expect(server.conversations.get("a")!.system_prompt).toBe("second");
  });

  it("makes the saves asked for while one is in flight into one more save", async () => {
    const { cake, api, server, state } = await started({
      conversations: [saved("a", "A", "2024-01-01T00:00:00Z")],
    });
    const saves = heldSaves(api, server);
    const first = cake.conversations.save("a");
    const later = ["x", "y", "z"].map((prompt) => {
      cake.conversations.update("a", { system_prompt: prompt });
      return cake.conversations.save("a");
    });
    expect(saves.sent()).toHaveLength(1);
    let laterDone = false;
    void Promise.all(later).then(() => (laterDone = true));
    saves.release();
    await first;
    await vi.waitFor(() => expect(saves.sent()).toHaveLength(2));
    expect(laterDone).toBe(false); // not until their state is acknowledged
    saves.release();
    await Promise.all(later);
    expect(saves.sent()).toHaveLength(2);
    expect(saves.sent()[1].system_prompt).toBe("z");
    expect(state().summaries[0]).toMatchObject({ id: "a", updated_at: saves.sent()[1].updated_at });
  });

  it("deletes a conversation after its save in flight, and drops the saves queued behind it", async () => {
    const a = saved("a", "A", "2024-01-01T00:00:00Z");
    const b = saved("b", "B", "2024-02-01T00:00:00Z");
    const { cake, api, server, state } = await started({ conversations: [a, b] });
    const saves = heldSaves(api, server);
    const saving = cake.conversations.save("b");
    cake.conversations.update("b", { system_prompt: "queued" });
    const queued = cake.conversations.save("b");
    const deleting = cake.deleteConversation("b");
    await Promise.resolve();
    expect(api.deleteConversation).not.toHaveBeenCalled();
    saves.release();
    await Promise.all([saving, queued, deleting]);
    expect(saves.sent()).toHaveLength(1);
    expect(api.deleteConversation).toHaveBeenCalledWith("b");
    const savedAt = vi.mocked(api.saveConversation).mock.invocationCallOrder[0];
    expect(vi.mocked(api.deleteConversation).mock.invocationCallOrder[0]).toBeGreaterThan(savedAt);
    expect(server.conversations.has("b")).toBe(false);
    expect(state().summaries.map((s) => s.id)).toEqual(["a"]);
  });

  it("stops a streaming reply when its conversation is deleted, without saving it back", async () => {
    const { cake, server, state } = await started();
    await cake.chat.send("first");
    const id = state().selectedId!;
    server.chatScript = replyUntilStopped("partial");
    const sending = cake.chat.send("second");
    await Promise.resolve();
    await cake.deleteConversation(id);
    await sending;
    expect(server.conversations.has(id)).toBe(false);
    expect(state().conversations[id]).toBeUndefined();
    expect(state().generatingId).toBeNull();
    expect(state().selectedId).not.toBe(id);
  });
});

describe("models", () => {
  it("loads a model with progress", async () => {
    const { cake, state } = await started();
    const fractions: number[] = [];
    cake.store.subscribe(() => {
      const loading = cake.store.get().loading;
      if (loading) fractions.push(loading.fraction);
    });
    await cake.models.load("m1");
    expect(fractions).toContain(0.5);
    expect(state().loadedModelId).toBe("m1");
    expect(state().loading).toBeNull();
  });

  it("imports a path and reports a path that is not a model", async () => {
    const { cake, state } = await started();
    await cake.models.importPath("/tmp/model.gguf");
    expect(state().models.map((m) => m.id)).toContain("file:/tmp/model.gguf");
    await cake.models.importPath("/tmp/notes.txt");
    expect(state().notices.at(-1)!.message).toBe("/tmp/notes.txt is not a model");
  });

  it("downloads with progress and can be cancelled", async () => {
    const { cake, server, state } = await started({ models: [] });
    server.downloadScript = (onProgress, signal) =>
      new Promise((_, reject) => {
        onProgress({
          type: "progress",
          file: "model.safetensors",
          downloaded_bytes: 5,
          total_bytes: 10,
          bytes_per_s: 1,
          eta_s: 5,
        });
        signal?.addEventListener("abort", () => reject(new DOMException("stopped", "AbortError")));
      });
    const downloading = cake.models.download("HuggingFaceTB/SmolLM2-135M-Instruct");
    await Promise.resolve();
    expect(state().download?.progress?.downloaded_bytes).toBe(5);
    cake.models.cancelDownload();
    await downloading;
    expect(state().download).toBeNull();
    expect(state().notices).toEqual([]);
  });

  it("adds a downloaded model to the list", async () => {
    const { cake, server, state } = await started({ models: [] });
    server.downloadScript = async () => model("hf:org/new");
    await cake.models.download("org/new");
    expect(state().models.map((m) => m.id)).toEqual(["hf:org/new"]);
  });

  it("deletes a model", async () => {
    const { cake, state } = await started({ models: [model("m1"), model("m2")] });
    await cake.models.remove("m1");
    expect(state().models.map((m) => m.id)).toEqual(["m2"]);
  });
});

describe("notices", () => {
  it("keep three at most, show a repeated message once, and drop OS error numbers", async () => {
    const { cake, state } = await started();
    cake.notices.report(new Error("cannot reach worker 10.0.0.2:10128 (os error 111)"));
    expect(state().notices.map((n) => n.message)).toEqual(["cannot reach worker 10.0.0.2:10128"]);
    for (const text of ["a", "b", "a", "c", "d"]) cake.notices.report(new Error(text));
    expect(state().notices.map((n) => n.message)).toEqual(["a", "c", "d"]);
  });

  it("keep failures until dismissed and let other notices fade", async () => {
    const { cake, state } = await started();
    vi.useFakeTimers();
    try {
      cake.notices.report(new Error("the disk is full"));
      cake.notices.inform("The voice prompt was cut to 60 s.");
      vi.advanceTimersByTime(60_000);
      expect(state().notices.map((n) => n.message)).toEqual(["the disk is full"]);
      cake.notices.dismiss(state().notices[0].id);
      expect(state().notices).toEqual([]);
    } finally {
      vi.useRealTimers();
    }
  });

  it("say an unreachable hub in plain words, with the technical text behind Details and the import way out", async () => {
    const { cake, server, state } = await started({ models: [] });
    const raw =
      "cannot reach the hub at https://huggingface.co for searching: https://huggingface.co/api/models?search=x&filter=gguf: Dns Failed: resolve dns name 'huggingface.co:443'";
    server.downloadScript = async () => {
      throw new StreamError(raw, "hub_unreachable");
    };
    expect(await cake.models.download("HuggingFaceTB/SmolLM2-135M-Instruct")).toBeNull();
    const [notice] = state().notices;
    expect(notice).toMatchObject({ message: HUB_UNREACHABLE_MESSAGE, detail: raw, action: "import-model" });
    // The welcome card says it too, until another download starts.
    expect(state().downloadFailure?.message).toBe(HUB_UNREACHABLE_MESSAGE);
    server.downloadScript = async () => model("hf:HuggingFaceTB/SmolLM2-135M-Instruct");
    await cake.models.download("HuggingFaceTB/SmolLM2-135M-Instruct");
    expect(state().downloadFailure).toBeNull();
  });
});

describe("hub search", () => {
  it("lists repositories, their GGUF files, and downloads the file picked", async () => {
    const { cake, api, server, state } = await started({ models: [] });
    server.hubRepos = {
      "org/Tiny-GGUF": [{ name: "tiny.Q4_K_M.gguf", size_bytes: 1000, quantization: "Q4_K_M" }],
      "org/Other": [],
    };
    expect((await cake.models.searchHub("tiny"))?.map((m) => m.repo_id)).toEqual(["org/Tiny-GGUF"]);
    const files = await cake.models.hubFiles("org/Tiny-GGUF");
    expect(files?.files.map((f) => f.quantization)).toEqual(["Q4_K_M"]);
    expect(await cake.models.hubFiles("org/missing")).toBeNull();
    expect(state().notices.map((n) => n.message)).toEqual(["org/missing was not found on the hub"]);

    server.downloadScript = async () => model("hf:org/Tiny-GGUF/tiny.Q4_K_M.gguf");
    await cake.models.download("org/Tiny-GGUF", "tiny.Q4_K_M.gguf");
    expect(vi.mocked(api.downloadModel).mock.calls[0][3]).toBe("tiny.Q4_K_M.gguf");
    expect(state().models.map((m) => m.id)).toEqual(["hf:org/Tiny-GGUF/tiny.Q4_K_M.gguf"]);
  });
});

describe("an empty reply", () => {
  it("is kept with its stats when the model ends at once", async () => {
    const { cake, server, state } = await started();
    server.chatScript = async () => STATS;
    await cake.chat.send("hi");
    expect(selectedConversation(state())!.messages).toEqual([
      { role: "user", content: "hi" },
      { role: "assistant", content: "", stats: STATS },
    ]);
  });
});
