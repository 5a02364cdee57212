// Generate (with why it is not possible yet), and while speaking: the
// model's loading message, then frames and seconds of audio made so far,
// and Stop.

import { formatSeconds } from "../lib/format";
import { speakSettings } from "../lib/speech";
import { useAppState, useCake } from "./context";
import { SpeakerIcon, StopIcon } from "./icons";
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
              <ProgressBar fraction={limit !== null ? speaking.seconds / limit : null} label="Generating speech" />
              <span class="progress-detail muted">
                {speaking.frames === 0
                  ? "Starting…"
                  : `${speaking.frames} ${speaking.frames === 1 ? "frame" : "frames"} · ${formatSeconds(speaking.seconds)} of audio`}
              </span>
            </>
          )}
        </div>
      ) : null}
    </div>
  );
}
