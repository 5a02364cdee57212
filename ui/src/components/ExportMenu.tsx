// Export the open conversation as Markdown or JSON (a download).

import { useRef } from "preact/hooks";
import type { ExportFormat } from "../lib/export";
import { useCake } from "./context";
import { SaveIcon } from "./icons";

export function ExportMenu({ conversationId }: { conversationId: string }) {
  const cake = useCake();
  const menu = useRef<HTMLDetailsElement>(null);
  const save = (format: ExportFormat) => {
    if (menu.current) menu.current.open = false;
    void cake.conversations.exportAs(conversationId, format);
  };
  return (
    <details class="export-menu" ref={menu} data-testid="export-menu">
      <summary class="icon-button" aria-label="Export conversation" title="Export conversation">
        <SaveIcon />
      </summary>
      <div class="export-options" role="menu">
        <button type="button" role="menuitem" data-testid="export-markdown" onClick={() => save("markdown")}>
          Markdown (.md)
        </button>
        <button type="button" role="menuitem" data-testid="export-json" onClick={() => save("json")}>
          JSON (.json)
        </button>
      </div>
    </details>
  );
}
