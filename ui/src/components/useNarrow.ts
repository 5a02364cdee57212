// Whether the window is narrow enough that the sidebar becomes a drawer
// (the same width as the stylesheet's breakpoint), updated as it resizes.

import { useEffect, useState } from "preact/hooks";

/** Below this width (CSS pixels) the sidebar is a drawer over the screen. */
export const DRAWER_BREAKPOINT = 860;

const QUERY = `(max-width: ${DRAWER_BREAKPOINT}px)`;

export function isNarrow(): boolean {
  return typeof window !== "undefined" && window.matchMedia?.(QUERY).matches === true;
}

export function useNarrow(): boolean {
  const [narrow, setNarrow] = useState(isNarrow);
  useEffect(() => {
    const query = window.matchMedia?.(QUERY);
    if (!query) return;
    const onChange = () => setNarrow(query.matches);
    query.addEventListener("change", onChange);
    return () => query.removeEventListener("change", onChange);
  }, []);
  return narrow;
}
