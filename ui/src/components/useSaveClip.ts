// Save a clip as a WAV file (a browser download, also in the desktop window).

import type { Clip } from "../api/types";
import { downloadBytes } from "../lib/download";
import { clipFileName } from "../lib/speech";
import { useCake } from "./context";

export function useSaveClip(): (clip: Clip) => Promise<void> {
  const cake = useCake();
  return async (clip) => {
    try {
      downloadBytes(await cake.speech.audio("clip", clip.id), clipFileName(clip), "audio/wav");
    } catch (error) {
      cake.notices.report(error);
    }
  };
}
