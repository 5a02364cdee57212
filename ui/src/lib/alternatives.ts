// Regenerated replies and edited messages keep what they replaced. A reply
// regenerated (or a user message edited) at message `index` starts a new
// version of the conversation from there: the versions it replaced (each
// that message and everything said after it) are kept on the message as
// `alternatives`, and the reader can switch between versions. Pure
// functions over message lists, no I/O.

import type { ReplyVersions, StoredMessage } from "../api/types";

/** How many versions the conversation has from the message at `index`, and which one shows (0-based). */
export function versionsAt(messages: StoredMessage[], index: number): { shown: number; count: number } {
  const versions = messages[index]?.alternatives;
  return versions ? { shown: versions.position, count: versions.others.length + 1 } : { shown: 0, count: 1 };
}

/**
 * Before a reply at `index` is made again: the messages it is asked for
 * (those before it), and the versions the new reply carries, the current one
 * last among the kept ones, so the new reply is the newest version.
 */
export function replaceFrom(
  messages: StoredMessage[],
  index: number,
): { before: StoredMessage[]; versions: ReplyVersions | undefined } {
  const before = messages.slice(0, index);
  const tail = messages.slice(index);
  if (tail.length === 0) return { before, versions: undefined };
  const kept = messages[index].alternatives;
  const current = withoutVersions(tail);
  const others = kept ? insertAt(kept.others, kept.position, current) : [current];
  return { before, versions: { others, position: others.length } };
}

/** The messages with version `wanted` shown from `index` (the others kept on it). */
export function showVersion(messages: StoredMessage[], index: number, wanted: number): StoredMessage[] {
  const versions = messages[index]?.alternatives;
  if (!versions || wanted === versions.position || wanted < 0 || wanted > versions.others.length) return messages;
  const all = insertAt(versions.others, versions.position, withoutVersions(messages.slice(index)));
  const shown = all[wanted];
  const others = all.filter((_, i) => i !== wanted);
  return [...messages.slice(0, index), { ...shown[0], alternatives: { others, position: wanted } }, ...shown.slice(1)];
}

/** `tail` with the versions record taken off its first message. */
function withoutVersions(tail: StoredMessage[]): StoredMessage[] {
  const [first, ...rest] = tail;
  const { alternatives: _versions, ...plain } = first;
  return [plain, ...rest];
}

function insertAt<T>(items: T[], at: number, item: T): T[] {
  return [...items.slice(0, at), item, ...items.slice(at)];
}
