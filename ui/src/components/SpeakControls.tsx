// Generate (with why it is not possible yet), and while speaking: the
// model's loading message, then the piece of a long script, frames and
// seconds of audio made so far, and Stop; the audio heard as it is made.

import { speakProgressFraction, speakProgressText, speakSettings } from "../lib/speech";
import { useAppState, useCake } from "./context";
import { SpeakerIcon, StopIcon } from "./icons";
import { LivePlayback } from "./LivePlayback";
import { ProgressBar } from "./ProgressBar";

export function SpeakControls() {
  const state = useAppState();
  const cake = useCake();
  const speaking = state.speaking;
  const problem = cake.speech.problem(state);
  const limit = speakSettings(state.speechForm).settings.max_seconds ?? null;

  return (
    <div class="speak-controls">
      <div class="speak-actions">
        <button
          type="button"
          class="primary"
          data-testid="speech-generate"
          disabled={problem !== null || speaking !== null}
          onClick={() => void cake.speech.speak()}
        >
          <SpeakerIcon /> {speaking ? "Generating…" : "Generate"}
        </button>
        {speaking ? (
          <button
            type="button"
            class="stop"
            data-testid="speech-stop"
            onClick={() => cake.speech.stop()}
            title="Stop (Escape)"
          >
            <StopIcon /> Stop
          </button>
        ) : problem !== null ? (
          <span class="muted small" data-testid="speech-hint">
            {problem}
          </span>
        ) : null}
      </div>
      {speaking ? (
        <div class="download-progress speak-progress" data-testid="speech-progress" aria-live="polite">
          {speaking.loading ? (
            <>
              <ProgressBar fraction={speaking.loading.fraction} label="Loading the speech model" />
              <span class="progress-detail muted">Loading the model: {speaking.loading.message}</span>
            </>
          ) : (
            <>
              <ProgressBar fraction={speakProgressFraction(speaking, limit)} label="Generating speech" />
              <span class="progress-detail muted">{speakProgressText(speaking)}</span>
            </>
          )}
        </div>
      ) : null}
      <LivePlayback />
    </div>
  );
}
