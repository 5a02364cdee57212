// Tests for reply versions, the theme choice and the keyboard shortcuts.

import { describe, expect, it } from "vitest";
import type { StoredMessage } from "../src/api/types";
import { replaceFrom, showVersion, versionsAt } from "../src/lib/alternatives";
import { normalizeConversation } from "../src/lib/conversation";
import { SHORTCUTS, keysLabel, neighbour, shortcutFor } from "../src/lib/shortcuts";
import { effectiveTheme, nextThemeChoice } from "../src/lib/theme";
import { loadPrefs } from "../src/state/prefs";
import { memoryStorage } from "./fake-api";

const user = (content: string): StoredMessage => ({ role: "user", content });
const reply = (content: string): StoredMessage => ({ role: "assistant", content });

/** The shown conversation's texts. */
const texts = (messages: StoredMessage[]) => messages.map((m) => m.content);

describe("reply versions", () => {
  const chat = [user("q1"), reply("a1"), user("q2"), reply("a2")];

  it("keep the replaced reply and what followed it", () => {
    const { before, versions } = replaceFrom(chat, 1);
    expect(texts(before)).toEqual(["q1"]);
    expect(versions).toEqual({ others: [[reply("a1"), user("q2"), reply("a2")]], position: 1 });
  });

  it("switch back and forth without losing any version", () => {
    const { before, versions } = replaceFrom(chat, 1);
    const second = [...before, { ...reply("b1"), alternatives: versions }];
    expect(versionsAt(second, 1)).toEqual({ shown: 1, count: 2 });

    const first = showVersion(second, 1, 0);
    expect(texts(first)).toEqual(["q1", "a1", "q2", "a2"]);
    expect(versionsAt(first, 1)).toEqual({ shown: 0, count: 2 });

    const again = showVersion(first, 1, 1);
    expect(texts(again)).toEqual(["q1", "b1"]);
    expect(again[1].alternatives).toEqual(versions);
  });

  it("number a third version after the others, whichever showed", () => {
    const { before, versions } = replaceFrom(chat, 3);
    const second = [...before, { ...reply("b2"), alternatives: versions }];
    const firstShown = showVersion(second, 3, 0);
    const third = replaceFrom(firstShown, 3);
    expect(third.versions?.position).toBe(2);
    const withThird = [...third.before, { ...reply("c2"), alternatives: third.versions }];
    expect(versionsAt(withThird, 3)).toEqual({ shown: 2, count: 3 });
    expect(texts(showVersion(withThird, 3, 0))).toEqual(["q1", "a1", "q2", "a2"]);
    expect(texts(showVersion(withThird, 3, 1))).toEqual(["q1", "a1", "q2", "b2"]);
  });

  it("ignore a version that does not exist", () => {
    const { before, versions } = replaceFrom(chat, 1);
    const second = [...before, { ...reply("b1"), alternatives: versions }];
    expect(showVersion(second, 1, 5)).toBe(second);
    expect(showVersion(second, 1, -1)).toBe(second);
    expect(showVersion(chat, 1, 0)).toBe(chat);
  });

  it("are dropped from a stored message when malformed", () => {
    const stored = normalizeConversation({
      id: "c",
      messages: [
        user("q"),
        { ...reply("a"), alternatives: { others: [[]], position: 0 } },
        { ...reply("b"), alternatives: { others: [[reply("x")]], position: 3 } },
        { ...reply("c"), alternatives: { others: [[reply("y")]], position: 1 } },
      ],
    });
    expect(stored.messages.map((m) => m.alternatives === undefined)).toEqual([true, true, true, false]);
  });
});

describe("theme", () => {
  it("follows the system until a theme is chosen", () => {
    expect(effectiveTheme("system", true)).toBe("dark");
    expect(effectiveTheme("system", false)).toBe("light");
    expect(effectiveTheme("light", true)).toBe("light");
    expect(effectiveTheme("dark", false)).toBe("dark");
  });

  it("cycles system, light, dark", () => {
    expect(nextThemeChoice("system")).toBe("light");
    expect(nextThemeChoice("light")).toBe("dark");
    expect(nextThemeChoice("dark")).toBe("system");
  });

  it("is kept with the preferences, and a bad stored value falls back to the system's", () => {
    const storage = memoryStorage();
    storage.setItem("cake.prefs", JSON.stringify({ theme: "dark" }));
    expect(loadPrefs(storage).theme).toBe("dark");
    storage.setItem("cake.prefs", JSON.stringify({ theme: "purple" }));
    expect(loadPrefs(storage).theme).toBe("system");
  });
});

describe("keyboard shortcuts", () => {
  const press = (key: string, held: Partial<Record<"ctrlKey" | "metaKey" | "shiftKey" | "altKey", boolean>> = {}) => ({
    key,
    ctrlKey: false,
    metaKey: false,
    shiftKey: false,
    altKey: false,
    ...held,
  });

  it("map key presses to actions, exactly", () => {
    expect(shortcutFor(press("O", { ctrlKey: true, shiftKey: true }))).toBe("new-conversation");
    expect(shortcutFor(press("o", { metaKey: true, shiftKey: true }))).toBe("new-conversation");
    expect(shortcutFor(press("o", { ctrlKey: true }))).toBeNull();
    expect(shortcutFor(press("Escape"))).toBe("stop");
    expect(shortcutFor(press("Escape", { shiftKey: true }))).toBe("focus-message");
    expect(shortcutFor(press("k", { ctrlKey: true }))).toBe("search");
    expect(shortcutFor(press("ArrowUp", { altKey: true }))).toBe("previous-conversation");
    expect(shortcutFor(press("ArrowDown", { altKey: true }))).toBe("next-conversation");
    expect(shortcutFor(press("ArrowDown"))).toBeNull();
    expect(shortcutFor(press("/", { ctrlKey: true }))).toBe("show-shortcuts");
  });

  it("are written for the platform", () => {
    const newChat = SHORTCUTS.find((s) => s.action === "new-conversation")!;
    expect(keysLabel(newChat, false)).toBe("Ctrl+Shift+O");
    expect(keysLabel(newChat, true)).toBe("⌘⇧O");
    const previous = SHORTCUTS.find((s) => s.action === "previous-conversation")!;
    expect(keysLabel(previous, false)).toBe("Alt+↑");
  });

  it("step through conversations, wrapping around", () => {
    expect(neighbour(["a", "b", "c"], "a", 1)).toBe("b");
    expect(neighbour(["a", "b", "c"], "a", -1)).toBe("c");
    expect(neighbour(["a", "b", "c"], "c", 1)).toBe("a");
    expect(neighbour(["a", "b"], "gone", 1)).toBe("a");
    expect(neighbour([], null, 1)).toBeNull();
  });
});
