// The script to speak, with how to write it for the chosen model: several
// speakers (and how many the script has right now) for a voice prompt
// model, plain text for a preset or LuxTTS model.

import { MAX_SPEAKERS, readsPlainText, scriptSpeakers } from "../lib/speech";
import { speechVoiceKind } from "../state/app-state";
import { useAppState, useCake } from "./context";

export function ScriptEditor() {
  const state = useAppState();
  const cake = useCake();
  const script = state.speechForm.script;
  const kind = speechVoiceKind(state);
  const plain = readsPlainText(kind);

  return (
    <div class="script-editor">
      <label class="field" for="speech-script">
        <span class="field-label">{plain ? "Text" : "Script"}</span>
      </label>
      <textarea
        id="speech-script"
        data-testid="speech-script"
        rows={7}
        spellcheck={true}
        placeholder={
          plain
            ? "Welcome back to the show. Today we look at how bread rises."
            : "Speaker 1: Welcome back to the show.\nSpeaker 2: Thanks, it's good to be here."
        }
        value={script}
        disabled={state.speaking !== null}
        onInput={(event) => cake.speech.edit({ script: event.currentTarget.value })}
      />
      <div class="script-meta">
        {plain ? (
          <span class="field-hint">
            {kind === "preset"
              ? "Plain text, read in the voice preset."
              : "Plain English text, read in the chosen voice; long texts are spoken sentence by sentence."}
          </span>
        ) : (
          <SpeakerHint script={script} />
        )}
      </div>
    </div>
  );
}

/** How to write several speakers, and how many the script has. */
function SpeakerHint({ script }: { script: string }) {
  const speakers = scriptSpeakers(script);
  const tooMany = speakers.count > MAX_SPEAKERS;
  return (
    <>
      <span class="field-hint">
        One line per turn, <code>Speaker 1: …</code>, <code>Speaker 2: …</code> (up to {MAX_SPEAKERS} speakers); plain
        text is read by one voice.
      </span>
      <span
        class={`speaker-count${tooMany ? " too-many" : ""}`}
        data-testid="speech-speaker-count"
        data-count={speakers.count}
        aria-live="polite"
      >
        {speakerText(speakers.count, speakers.plain)}
      </span>
    </>
  );
}

function speakerText(count: number, plain: boolean): string {
  if (count === 0) return "No speakers yet";
  if (plain) return "1 speaker (plain text)";
  const text = `${count} ${count === 1 ? "speaker" : "speakers"}`;
  return count > MAX_SPEAKERS ? `${text}: at most ${MAX_SPEAKERS}` : text;
}
