// The app's frame: sidebar, the chat, Models, Speech or Cluster screen, error
// toasts, and the app-wide keys and file drops (Escape stops a reply or the
// speech being made; files dropped on the desktop window are imported as
// models, or added as voices while the Speech screen is open).

import { useEffect, useState } from "preact/hooks";
import { nativeFiles } from "../transport";
import { ChatView } from "./ChatView";
import { ClusterPanel } from "./ClusterPanel";
import { useAppState, useCake } from "./context";
import { ModelsPanel } from "./ModelsPanel";
import { Notices } from "./Notices";
import { Sidebar } from "./Sidebar";
import { SpeechPanel } from "./SpeechPanel";

export function App() {
  const state = useAppState();
  const dropping = useFileDrops();
  useEscapeStops();

  return (
    <div class="app">
      <Sidebar />
      <main class="main">
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
      <Notices />
      {dropping ? (
        <div class="drop-overlay" aria-hidden="true">
          <div class="drop-message">
            {state.view === "speech" ? "Drop WAV files to add voices" : "Drop to import the model"}
          </div>
        </div>
      ) : null}
    </div>
  );
}

/** Escape stops the reply being generated, else the speech being made (unless a dialog is open). */
function useEscapeStops() {
  const cake = useCake();
  useEffect(() => {
    const onKey = (event: KeyboardEvent) => {
      if (event.key !== "Escape" || event.defaultPrevented) return;
      if (document.querySelector("dialog[open]")) return;
      const state = cake.store.get();
      if (state.generatingId !== null) {
        event.preventDefault();
        cake.chat.stop();
      } else if (state.speaking !== null) {
        event.preventDefault();
        cake.speech.stop();
      }
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, [cake]);
}

/**
 * In the desktop window, take files dropped on it: voices on the Speech
 * screen, models anywhere else. Returns whether files hover.
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
          if (cake.store.get().view === "speech") {
            await cake.speech.addVoicePaths(paths);
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
