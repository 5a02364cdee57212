// A native <dialog> shown as a modal while the component lives (the
// browser traps focus in it), with `initialFocus` focused first.

import type { RefObject } from "preact";
import { useEffect, useRef } from "preact/hooks";

export function useModal(initialFocus: RefObject<HTMLElement>): RefObject<HTMLDialogElement> {
  const dialog = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const element = dialog.current;
    if (!element) return;
    if (!element.open) element.showModal();
    initialFocus.current?.focus();
    return () => element.open && element.close();
  }, []);
  return dialog;
}
