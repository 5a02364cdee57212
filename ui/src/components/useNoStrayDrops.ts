// In a browser, a file dropped just beside a drop zone would make the tab
// open it and leave the app: while a zone is shown, such drops do nothing.

import { useEffect } from "preact/hooks";
import { nativeFiles } from "../transport";

export function useNoStrayDrops() {
  useEffect(() => {
    if (nativeFiles) return; // the desktop window handles drops itself
    const ignore = (event: DragEvent) => {
      if (event.dataTransfer?.types.includes("Files")) event.preventDefault();
    };
    window.addEventListener("dragover", ignore);
    window.addEventListener("drop", ignore);
    return () => {
      window.removeEventListener("dragover", ignore);
      window.removeEventListener("drop", ignore);
    };
  }, []);
}
