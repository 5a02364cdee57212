// The button at the start of every screen's header that shows or hides the
// sidebar: in a wide window it hides and shows it (remembered); in a narrow
// one the sidebar is a drawer over the screen, and the button opens it.

import { useAppState, useCake } from "./context";
import { SidebarIcon } from "./icons";
import { useNarrow } from "./useNarrow";

export function SidebarToggle() {
  const state = useAppState();
  const cake = useCake();
  const narrow = useNarrow();
  const shown = narrow ? state.drawerOpen : !state.prefs.sidebarHidden;
  return (
    <button
      type="button"
      class="icon-button sidebar-toggle"
      data-testid="sidebar-toggle"
      aria-label={shown ? "Hide the sidebar" : "Show the sidebar"}
      aria-expanded={shown}
      aria-controls="sidebar"
      title={shown ? "Hide the sidebar" : "Show the sidebar: conversations, Models, Speech, Cluster"}
      onClick={() => cake.toggleSidebar(narrow)}
    >
      <SidebarIcon />
    </button>
  );
}
