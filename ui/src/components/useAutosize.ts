// Grow a textarea with its content, up to the max-height set in CSS.

import { useLayoutEffect } from "preact/hooks";
import type { RefObject } from "preact";

export function useAutosize(area: RefObject<HTMLTextAreaElement>, value: string): void {
  useLayoutEffect(() => {
    const element = area.current;
    if (!element) return;
    element.style.height = "auto";
    element.style.height = `${element.scrollHeight + 2}px`;
  }, [area, value]);
}
