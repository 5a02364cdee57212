// While speech is heard as it is made: how much has played, whether it waits
// for more (speech made slower than it plays), and a way to silence it
// (generation goes on). Gone once the audio has played out.

import { formatClock } from "../lib/speech";
import { liveAudio, useLivePlayback } from "./live-audio";

export function LivePlayback() {
  const live = useLivePlayback();
  if (!live.playing) return null;
  return (
    <div
      class="live-playback muted small"
      data-testid="live-playback"
      data-played-seconds={live.playedSeconds.toFixed(2)}
      data-buffering={live.buffering}
    >
      <span class="live-dot" aria-hidden="true" />
      <span>
        {live.buffering ? "Waiting for more speech" : "Playing as it is made"} · {formatClock(live.playedSeconds)}
      </span>
      <button
        type="button"
        class="link-button small"
        data-testid="live-playback-silence"
        onClick={() => liveAudio.stop()}
      >
        Silence
      </button>
    </div>
  );
}
