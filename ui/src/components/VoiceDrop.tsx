// Where voices are added: WAV recordings (voice prompts) and VibeVoice-
// Realtime voice presets (`.pt`, `.safetensors`) dropped here or chosen with
// the file input are uploaded (`add_voice {name, file_base64, file_name}`;
// the backend tells them apart, and refuses anything else). In the desktop
// window files dropped anywhere arrive as paths instead (see App's file drops).

import { useRef } from "preact/hooks";
import { nativeFiles } from "../transport";
import { useAppState, useCake } from "./context";
import { PlusIcon } from "./icons";
import { useFileDropZone } from "./useFileDropZone";

/** What the file input offers: WAV voice prompts and voice presets. */
const VOICE_FILE_TYPES = ".wav,audio/wav,.pt,.safetensors";

export function VoiceDrop() {
  const state = useAppState();
  const cake = useCake();
  const input = useRef<HTMLInputElement>(null);
  const { over, handlers } = useFileDropZone((files) => void upload(files));

  async function upload(files: readonly File[]) {
    for (const file of files) {
      let bytes: Uint8Array;
      try {
        bytes = new Uint8Array(await file.arrayBuffer());
      } catch (error) {
        const reason = error instanceof Error ? error.message : String(error);
        cake.notices.report(new Error(`Cannot read ${file.name}: ${reason}`));
        continue;
      }
      await cake.speech.addVoiceUpload(file.name, bytes);
    }
  }

  return (
    <div class={`voice-drop${over ? " over" : ""}`} data-testid="voice-drop" {...handlers}>
      <p class="voice-drop-title">
        <strong>Drop WAV files or voice presets here</strong> to add voices
      </p>
      <p class="muted small">
        For VibeVoice-1.5B, a WAV of one person speaking clearly for a few seconds to a minute (longer recordings are
        cut at 60 s); for VibeVoice-Realtime, a voice preset (<code>.pt</code> or <code>.safetensors</code>); for
        LuxTTS, a WAV of a few seconds, then the words it says under the voice.
        {nativeFiles ? " You can also drop files anywhere on this window." : ""}
      </p>
      <div class="form-row">
        <button type="button" onClick={() => input.current?.click()} disabled={state.addingVoices > 0}>
          <PlusIcon /> Choose files…
        </button>
        {state.addingVoices > 0 ? (
          <span class="muted small" aria-live="polite">
            Adding…
          </span>
        ) : null}
      </div>
      <input
        ref={input}
        type="file"
        accept={VOICE_FILE_TYPES}
        multiple
        tabIndex={-1}
        class="visually-hidden"
        data-testid="voice-file-input"
        onChange={(event) => {
          const files = Array.from(event.currentTarget.files ?? []);
          event.currentTarget.value = ""; // choosing the same file again still fires
          void upload(files);
        }}
      />
    </div>
  );
}
