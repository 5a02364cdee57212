// The clips made so far (kept by the backend, so they survive restarts).

import { ClipItem } from "./ClipItem";
import { useAppState } from "./context";

export function ClipList() {
  const state = useAppState();
  return (
    <section class="clip-section" aria-labelledby="clip-list-title">
      <h2 id="clip-list-title" class="section-title">
        Clips
      </h2>
      {!state.clipsReady ? (
        <p class="muted">Loading the clips…</p>
      ) : state.clips.length === 0 ? (
        <p class="muted small">No clips yet. Generated speech is kept here.</p>
      ) : null}
      <ul class="clip-list" data-testid="clip-list">
        {state.clips.map((clip) => (
          <ClipItem key={clip.id} clip={clip} latest={clip.id === state.latestClipId} />
        ))}
      </ul>
    </section>
  );
}
