// Settings that belong to the user rather than to one conversation, kept in
// the web view's localStorage: the reply length limit, the context length,
// whether each reply gets a fresh random seed, the colour theme, whether the
// sidebar is hidden, and the last opened conversation.

import { isThemeChoice, type ThemeChoice } from "../lib/theme";

export interface Prefs {
  maxTokens: number;
  /** Tokens a chat may hold (prompt and reply); null: the model's own context length. */
  contextLength: number | null;
  /** Draw a new seed for every reply (else the conversation's seed is reused). */
  freshSeed: boolean;
  theme: ThemeChoice;
  /** The sidebar was hidden in a wide window (a narrow one shows it as a drawer on demand). */
  sidebarHidden: boolean;
}

export const DEFAULT_PREFS: Prefs = {
  maxTokens: 1024,
  contextLength: null,
  freshSeed: true,
  theme: "system",
  sidebarHidden: false,
};

const PREFS_KEY = "cake.prefs";
const LAST_CONVERSATION_KEY = "cake.lastConversation";

/** The subset of the Storage API used here; tests pass a Map-backed stand-in. */
export type KeyValueStorage = Pick<Storage, "getItem" | "setItem" | "removeItem">;

export function browserStorage(): KeyValueStorage | null {
  try {
    return typeof localStorage === "undefined" ? null : localStorage;
  } catch {
    return null; // storage disabled by the browser
  }
}

export function loadPrefs(storage: KeyValueStorage | null): Prefs {
  try {
    const saved = JSON.parse(storage?.getItem(PREFS_KEY) ?? "{}") as Partial<Prefs>;
    return {
      maxTokens: positiveInteger(saved.maxTokens) ?? DEFAULT_PREFS.maxTokens,
      contextLength: positiveInteger(saved.contextLength),
      freshSeed: typeof saved.freshSeed === "boolean" ? saved.freshSeed : DEFAULT_PREFS.freshSeed,
      theme: isThemeChoice(saved.theme) ? saved.theme : DEFAULT_PREFS.theme,
      sidebarHidden: saved.sidebarHidden === true,
    };
  } catch {
    return { ...DEFAULT_PREFS };
  }
}

export function savePrefs(storage: KeyValueStorage | null, prefs: Prefs): void {
  try {
    storage?.setItem(PREFS_KEY, JSON.stringify(prefs));
  } catch {
    // Full or disabled storage: the preference lasts for this session only.
  }
}

export function loadLastConversation(storage: KeyValueStorage | null): string | null {
  try {
    return storage?.getItem(LAST_CONVERSATION_KEY) ?? null;
  } catch {
    return null;
  }
}

export function saveLastConversation(storage: KeyValueStorage | null, id: string | null): void {
  try {
    if (id === null) storage?.removeItem(LAST_CONVERSATION_KEY);
    else storage?.setItem(LAST_CONVERSATION_KEY, id);
  } catch {
    // See savePrefs.
  }
}

function positiveInteger(value: unknown): number | null {
  return typeof value === "number" && Number.isInteger(value) && value > 0 ? value : null;
}
