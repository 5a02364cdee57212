// A place files can be dropped on: whether files hover over it, and the
// drag handlers to put on its element (drags of anything else pass by).
// While it is shown, a file dropped just beside it does nothing: in a
// browser the tab would open the file and leave the app.

import { useEffect, useRef, useState } from "preact/hooks";
import { nativeFiles } from "../transport";

export function useFileDropZone(onFiles: (files: File[]) => void) {
  const depth = useRef(0);
  const [over, setOver] = useState(false);
  useNoStrayDrops();
  const carriesFiles = (event: DragEvent) => event.dataTransfer?.types.includes("Files") ?? false;
  const handlers = {
    onDragEnter: (event: DragEvent) => {
      if (!carriesFiles(event)) return;
      event.preventDefault();
      depth.current += 1;
      setOver(true);
    },
    onDragOver: (event: DragEvent) => {
      if (!carriesFiles(event)) return;
      event.preventDefault();
      if (event.dataTransfer) event.dataTransfer.dropEffect = "copy";
    },
    onDragLeave: () => {
      depth.current = Math.max(0, depth.current - 1);
      if (depth.current === 0) setOver(false);
    },
    onDrop: (event: DragEvent) => {
      event.preventDefault();
      depth.current = 0;
      setOver(false);
      const files = Array.from(event.dataTransfer?.files ?? []);
      if (files.length > 0) onFiles(files);
    },
  };
  return { over, handlers };
}

function useNoStrayDrops() {
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
