// The app's keyboard shortcuts: which key press means what, and how each is
// written for the person (Ctrl on Linux and Windows, ⌘ on a Mac). Browsers
// keep Ctrl+N, Ctrl+T and Ctrl+W for themselves, so a new conversation is
// Ctrl+Shift+O, as in other chat apps.

export type ShortcutAction =
  | "new-conversation"
  | "focus-message"
  | "search"
  | "previous-conversation"
  | "next-conversation"
  | "stop"
  | "show-shortcuts";

/** The parts of a key press the shortcuts look at. */
export interface KeyPress {
  key: string;
  ctrlKey: boolean;
  metaKey: boolean;
  shiftKey: boolean;
  altKey: boolean;
}

interface Shortcut {
  action: ShortcutAction;
  /** Ctrl (⌘ on a Mac) held. */
  mod: boolean;
  shift: boolean;
  alt: boolean;
  /** `KeyboardEvent.key`, lower case. */
  key: string;
  description: string;
}

export const SHORTCUTS: readonly Shortcut[] = [
  { action: "new-conversation", mod: true, shift: true, alt: false, key: "o", description: "New conversation" },
  { action: "focus-message", mod: false, shift: true, alt: false, key: "escape", description: "Type a message" },
  { action: "search", mod: true, shift: false, alt: false, key: "k", description: "Search conversations" },
  {
    action: "previous-conversation",
    mod: false,
    shift: false,
    alt: true,
    key: "arrowup",
    description: "Previous conversation",
  },
  {
    action: "next-conversation",
    mod: false,
    shift: false,
    alt: true,
    key: "arrowdown",
    description: "Next conversation",
  },
  { action: "stop", mod: false, shift: false, alt: false, key: "escape", description: "Stop the reply or the speech" },
  { action: "show-shortcuts", mod: true, shift: false, alt: false, key: "/", description: "Show these shortcuts" },
];

/** The action `press` asks for, if any. */
export function shortcutFor(press: KeyPress): ShortcutAction | null {
  const mod = press.ctrlKey || press.metaKey;
  const key = press.key.toLowerCase();
  const found = SHORTCUTS.find(
    (s) => s.key === key && s.mod === mod && s.shift === press.shiftKey && s.alt === press.altKey,
  );
  return found?.action ?? null;
}

const KEY_NAMES: Record<string, string> = { escape: "Esc", arrowup: "↑", arrowdown: "↓" };

/** How `shortcut` is written, e.g. "Ctrl+Shift+O" or "⌘⇧O" on a Mac. */
export function keysLabel(shortcut: Shortcut, mac: boolean): string {
  const key = KEY_NAMES[shortcut.key] ?? shortcut.key.toUpperCase();
  if (mac) return `${shortcut.mod ? "⌘" : ""}${shortcut.alt ? "⌥" : ""}${shortcut.shift ? "⇧" : ""}${key}`;
  return [shortcut.mod && "Ctrl", shortcut.alt && "Alt", shortcut.shift && "Shift", key].filter(Boolean).join("+");
}

/** Whether this looks like a Mac (its shortcuts use ⌘). */
export function onMac(): boolean {
  return typeof navigator !== "undefined" && /Mac/.test(navigator.platform);
}

/** The conversation `step` places from `current` in `order` (wrapping around), or null. */
export function neighbour(order: string[], current: string | null, step: 1 | -1): string | null {
  if (order.length === 0) return null;
  const at = current === null ? -1 : order.indexOf(current);
  if (at === -1) return order[0];
  return order[(at + step + order.length) % order.length];
}
