// The sidebar: the theme and shortcut buttons, new conversation, search, the
// conversation list (open, delete with confirmation) and the buttons to the
// Models, Speech and Cluster screens.

import { useState } from "preact/hooks";
import type { ClusterStatus } from "../api/types";
import { UNTITLED, displayTitle } from "../lib/conversation";
import { conversationOrder } from "../state/app-state";
import { useAppState, useCake } from "./context";
import { ConfirmDialog } from "./ConfirmDialog";
import { ConversationSearchField, SearchResults, useConversationSearch } from "./ConversationSearch";
import { CubeIcon, KeyboardIcon, NetworkIcon, PlusIcon, SpeakerIcon, TrashIcon } from "./icons";
import { ThemeButton } from "./ThemeButton";
// The app's own icon (inlined by Vite): an emoji is an empty box where no emoji font is installed.
import appIcon from "../../../icons/hicolor/128x128/cake.png";

interface Item {
  id: string;
  title: string;
}

export function Sidebar({ onShowShortcuts }: { onShowShortcuts: () => void }) {
  const state = useAppState();
  const cake = useCake();
  const [deleting, setDeleting] = useState<Item | null>(null);
  const [query, setQuery] = useState("");
  const matches = useConversationSearch(query);

  const titleOf = (id: string, stored: string) => {
    const open = state.conversations[id];
    return open ? displayTitle(open) : stored || UNTITLED;
  };
  const storedTitles = new Map(state.summaries.map((s) => [s.id, s.title]));
  const items: Item[] = conversationOrder(state).map((id) => ({ id, title: titleOf(id, storedTitles.get(id) ?? "") }));
  const loaded = state.models.find((m) => m.id === state.loadedModelId);

  return (
    <nav class="sidebar" id="sidebar" aria-label="Conversations">
      <div class="brand">
        <img class="brand-mark" src={appIcon} alt="" aria-hidden="true" data-testid="app-icon" />
        <span class="brand-name">Cake</span>
        {state.info ? <span class="muted small">v{state.info.version}</span> : null}
        <span class="brand-tools">
          <ThemeButton />
          <button
            type="button"
            class="icon-button"
            data-testid="shortcuts-button"
            aria-label="Keyboard shortcuts"
            title="Keyboard shortcuts"
            onClick={onShowShortcuts}
          >
            <KeyboardIcon />
          </button>
        </span>
      </div>
      <button
        type="button"
        class="new-conversation"
        data-testid="new-conversation"
        onClick={() => {
          cake.conversations.create();
          cake.closeDrawer();
        }}
      >
        <PlusIcon /> New conversation
      </button>
      <ConversationSearchField query={query} onQuery={setQuery} />
      {query.trim() !== "" ? (
        <SearchResults
          matches={matches}
          onOpen={(id) => {
            cake.closeDrawer();
            void cake.conversations.open(id);
          }}
        />
      ) : (
        <ul class="conversation-list">
          {items.map((item) => {
            const current = state.view === "chat" && item.id === state.selectedId;
            return (
              <li
                key={item.id}
                class={`conversation-item${current ? " current" : ""}`}
                data-testid="conversation-item"
                data-conversation-id={item.id}
              >
                <button
                  type="button"
                  class="conversation-open"
                  aria-current={current ? "page" : undefined}
                  onClick={() => {
                    cake.closeDrawer();
                    void cake.conversations.open(item.id);
                  }}
                >
                  {state.generatingId === item.id ? <span class="typing-dot" aria-label="Replying" /> : null}
                  <span class="conversation-title">{item.title}</span>
                </button>
                <button
                  type="button"
                  class="icon-button conversation-delete"
                  data-testid="conversation-delete"
                  aria-label={`Delete conversation “${item.title}”`}
                  title="Delete conversation"
                  onClick={() => setDeleting(item)}
                >
                  <TrashIcon />
                </button>
              </li>
            );
          })}
        </ul>
      )}
      <button
        type="button"
        class={`models-button${state.view === "models" ? " active" : ""}`}
        data-testid="models-button"
        aria-pressed={state.view === "models"}
        onClick={() => cake.showView(state.view === "models" ? "chat" : "models")}
      >
        <CubeIcon />
        <span class="models-button-text">
          <span>Models</span>
          <span class="muted small">{loaded ? loaded.name : "none loaded"}</span>
        </span>
      </button>
      <button
        type="button"
        class={`models-button${state.view === "speech" ? " active" : ""}`}
        data-testid="speech-button"
        aria-pressed={state.view === "speech"}
        onClick={() => cake.showView(state.view === "speech" ? "chat" : "speech")}
      >
        <SpeakerIcon />
        <span class="models-button-text">
          <span>Speech</span>
          <span class="muted small">{state.speaking ? "generating…" : "scripts in your voices"}</span>
        </span>
      </button>
      <button
        type="button"
        class={`models-button${state.view === "cluster" ? " active" : ""}`}
        data-testid="cluster-button"
        aria-pressed={state.view === "cluster"}
        onClick={() => cake.showView(state.view === "cluster" ? "chat" : "cluster")}
      >
        <NetworkIcon />
        <span class="models-button-text">
          <span>Cluster</span>
          <span class="muted small">{clusterSummary(state.cluster)}</span>
        </span>
      </button>
      {deleting ? (
        <ConfirmDialog
          title="Delete this conversation?"
          message={`“${deleting.title}” will be deleted for good.`}
          confirmLabel="Delete"
          onCancel={() => setDeleting(null)}
          onConfirm={() => {
            setDeleting(null);
            void cake.deleteConversation(deleting.id);
          }}
        />
      ) : null}
    </nav>
  );
}

/** The Cluster button's second line: this machine's role, as last seen. */
function clusterSummary(status: ClusterStatus | null): string {
  if (!status) return "machines on your network";
  if (status.role === "worker") return "worker";
  if (status.role === "off") return "off";
  const workers = status.machines.filter((m) => m.state === "authenticated").length;
  return `master · ${workers} ${workers === 1 ? "worker" : "workers"}`;
}
