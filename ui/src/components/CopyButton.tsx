// A button that copies a text and says "Copied" (or why not) for a moment.

import { useState } from "preact/hooks";
import { copyText } from "../lib/clipboard";
import { CopyIcon } from "./icons";

export function CopyButton({ text, testid }: { text: string; testid?: string }) {
  const [label, setLabel] = useState("Copy");
  const say = (said: string) => {
    setLabel(said);
    setTimeout(() => setLabel("Copy"), 1500);
  };
  return (
    <button
      type="button"
      class="ghost small"
      data-testid={testid}
      onClick={() =>
        copyText(text).then(
          () => say("Copied"),
          () => say("Copy failed"),
        )
      }
    >
      <CopyIcon /> {label}
    </button>
  );
}
