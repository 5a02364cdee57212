// Searching the saved conversations' titles and messages from the sidebar:
// results replace the list while there is a query, each with the text
// around its match; Escape clears the search.

import { useEffect, useState } from "preact/hooks";
import type { ConversationMatch } from "../api/types";
import { useCake } from "./context";

/** The search runs this long after the last keystroke. */
const SEARCH_DELAY_MS = 250;

interface Props {
  query: string;
  onQuery: (query: string) => void;
}

export function ConversationSearchField({ query, onQuery }: Props) {
  return (
    <input
      type="search"
      class="conversation-search"
      data-testid="conversation-search"
      placeholder="Search conversations"
      aria-label="Search conversations"
      value={query}
      onInput={(event) => onQuery(event.currentTarget.value)}
      onKeyDown={(event) => {
        if (event.key === "Escape" && query !== "") {
          event.stopPropagation();
          onQuery("");
        }
      }}
    />
  );
}

/** The matches of `query` (null while the first search runs). */
export function useConversationSearch(query: string): ConversationMatch[] | null {
  const cake = useCake();
  const [matches, setMatches] = useState<ConversationMatch[] | null>(null);
  useEffect(() => {
    setMatches(null);
    if (query.trim() === "") return;
    let current = true;
    const timer = setTimeout(() => {
      void cake.conversations.search(query).then((found) => {
        if (current) setMatches(found);
      });
    }, SEARCH_DELAY_MS);
    return () => {
      current = false;
      clearTimeout(timer);
    };
  }, [query]);
  return matches;
}

export function SearchResults({
  matches,
  onOpen,
}: {
  matches: ConversationMatch[] | null;
  onOpen: (id: string) => void;
}) {
  if (matches === null) return <p class="muted small search-status">Searching…</p>;
  if (matches.length === 0)
    return (
      <p class="muted small search-status" data-testid="search-empty">
        No conversation contains that.
      </p>
    );
  return (
    <ul class="conversation-list" aria-label="Search results">
      {matches.map((match) => (
        <li key={match.id} class="conversation-item" data-testid="search-result" data-conversation-id={match.id}>
          <button type="button" class="conversation-open search-result" onClick={() => onOpen(match.id)}>
            <span class="conversation-title">{match.title || "New conversation"}</span>
            <span class="search-snippet muted small">{match.snippet}</span>
          </button>
        </li>
      ))}
    </ul>
  );
}
