// The app's frame: sidebar (a drawer in a narrow window), the chat, Models,
// Speech or Cluster screen, error
// toasts, the theme, the keyboard shortcuts (lib/shortcuts.ts; Escape stops
// a reply or the speech being made, or silences speech still playing) and
// file drops (files dropped on the desktop window are imported as models,
// added as voices while the Speech screen is open, or attached to the next
// message when they are pictures dropped on the chat).

import { useEffect, useState } from "preact/hooks";
import { neighbour, shortcutFor } from "../lib/shortcuts";
import { applyTheme } from "../lib/theme";
import { conversationOrder } from "../state/app-state";
import { nativeFiles } from "../transport";
import { looksLikePicture } from "../state/pictures";
import { ChatView } from "./ChatView";
import { ClusterPanel } from "./ClusterPanel";
import { useAppState, useCake } from "./context";
import { liveAudio } from "./live-audio";
import { ModelsPanel } from "./ModelsPanel";
import { Notices } from "./Notices";
import { ShortcutsDialog } from "./ShortcutsDialog";
import { Sidebar } from "./Sidebar";
import { SpeechPanel } from "./SpeechPanel";
import { useTheme } from "./useTheme";

export function App() {
  const state = useAppState();
  const cake = useCake();
  const dropping = useFileDrops();
  const [showingShortcuts, setShowingShortcuts] = useState(false);
  useShortcuts(setShowingShortcuts);
  // Put on the page while rendering, so that children drawing with the
  // theme's colours (waveforms) read the new ones in their effects.
  applyTheme(useTheme());

  const frame = `app${state.prefs.sidebarHidden ? " sidebar-hidden" : ""}${state.drawerOpen ? " drawer-open" : ""}`;
  return (
    <div class={frame}>
      <Sidebar onShowShortcuts={() => setShowingShortcuts(true)} />
      {state.drawerOpen ? (
        <div
          class="drawer-backdrop"
          data-testid="drawer-backdrop"
          aria-hidden="true"
          onClick={() => cake.closeDrawer()}
        />
      ) : null}
      <main class="main">
        <Notices />
        {state.view === "models" ? (
          <ModelsPanel />
        ) : state.view === "cluster" ? (
          <ClusterPanel />
        ) : state.view === "speech" ? (
          <SpeechPanel />
        ) : (
          <ChatView />
        )}
      </main>
      {showingShortcuts ? <ShortcutsDialog onClose={() => setShowingShortcuts(false)} /> : null}
      {dropping ? (
        <div class="drop-overlay" aria-hidden="true">
          <div class="drop-message">
            {state.view === "speech"
              ? "Drop WAV files or voice presets to add voices"
              : state.view === "chat"
                ? "Drop pictures to attach them, or a model to import it"
                : "Drop to import the model"}
          </div>
        </div>
      ) : null}
    </div>
  );
}

/**
 * The keyboard shortcuts (see lib/shortcuts.ts). None acts while a dialog
 * is open: the dialog has the keys (Escape closes it).
 */
function useShortcuts(showShortcuts: (show: boolean) => void) {
  const cake = useCake();
  useEffect(() => {
    const onKey = (event: KeyboardEvent) => {
      if (event.defaultPrevented || document.querySelector("dialog[open]")) return;
      const action = shortcutFor(event);
      if (action === null) return;
      const state = cake.store.get();
      switch (action) {
        case "stop":
          if (state.generatingId !== null) cake.chat.stop();
          else if (state.speaking !== null) cake.speech.stop();
          else if (state.readingAloud !== null) cake.speech.stopReading();
          else if (liveAudio.store.get().playing) liveAudio.stop();
          else return; // Escape means nothing here: leave it to the page
          break;
        case "new-conversation":
          cake.conversations.create();
          cake.showView("chat");
          break;
        case "focus-message": {
          const focusBox = () => document.querySelector<HTMLTextAreaElement>('[data-testid="chat-input"]')?.focus();
          if (state.view === "chat") focusBox();
          else {
            cake.showView("chat");
            setTimeout(focusBox); // once the chat screen has rendered
          }
          break;
        }
        case "search":
          document.querySelector<HTMLInputElement>('[data-testid="conversation-search"]')?.focus();
          break;
        case "previous-conversation":
        case "next-conversation": {
          const next = neighbour(conversationOrder(state), state.selectedId, action === "next-conversation" ? 1 : -1);
          if (next !== null) void cake.conversations.open(next);
          break;
        }
        case "show-shortcuts":
          showShortcuts(true);
          break;
      }
      event.preventDefault();
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, [cake, showShortcuts]);
}

/**
 * In the desktop window, take files dropped on it: voices on the Speech
 * screen, pictures on the chat (attached to the next message), models
 * anywhere else. Returns whether files hover.
 */
function useFileDrops(): boolean {
  const cake = useCake();
  const [hovering, setHovering] = useState(false);
  useEffect(() => {
    if (!nativeFiles) return;
    let unsubscribe: (() => void) | null = null;
    let active = true;
    nativeFiles
      .watchDrops({
        hovering: setHovering,
        dropped: async (paths) => {
          const view = cake.store.get().view;
          if (view === "speech") {
            await cake.speech.addVoicePaths(paths);
            return;
          }
          if (view === "chat" && paths.every(looksLikePicture)) {
            await cake.pictures.attachPaths(paths);
            return;
          }
          cake.showView("models");
          for (const path of paths) await cake.models.importPath(path);
        },
      })
      .then(
        (stop) => (active ? (unsubscribe = stop) : stop()),
        (error) => cake.notices.report(error),
      );
    return () => {
      active = false;
      unsubscribe?.();
    };
  }, [cake]);
  return hovering;
}
