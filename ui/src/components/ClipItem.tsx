// One past clip: the start of its script, length, date, and play, save and
// delete (with confirmation).

import { useState } from "preact/hooks";
import type { Clip } from "../api/types";
import { formatAudioDuration, scriptExcerpt } from "../lib/speech";
import { ConfirmDialog } from "./ConfirmDialog";
import { useCake } from "./context";
import { SaveIcon, TrashIcon } from "./icons";
import { PlayButton } from "./PlayButton";
import { player } from "./playback";
import { useAudioControl } from "./useAudio";
import { useSaveClip } from "./useSaveClip";

export function ClipItem({ clip, latest }: { clip: Clip; latest: boolean }) {
  const cake = useCake();
  const control = useAudioControl("clip", clip.id);
  const save = useSaveClip();
  const [confirming, setConfirming] = useState(false);
  const excerpt = scriptExcerpt(clip.script) || "(empty script)";

  return (
    <li class={`clip-item${latest ? " latest" : ""}`} data-testid="clip-item" data-clip-id={clip.id}>
      <PlayButton
        playing={control.playing}
        loading={control.loading}
        onClick={control.toggle}
        label={`clip “${excerpt}”`}
        testid="clip-item-play"
      />
      <div class="clip-item-main">
        <span class="clip-excerpt" title={clip.script}>
          {excerpt}
        </span>
        <span class="muted small">
          {formatAudioDuration(clip.duration_s)} · {formatDate(clip.created_at)}
          {latest ? " · latest" : ""}
        </span>
      </div>
      <button
        type="button"
        class="icon-button"
        data-testid="clip-item-save"
        aria-label="Save clip as WAV"
        title="Save as WAV"
        onClick={() => void save(clip)}
      >
        <SaveIcon />
      </button>
      <button
        type="button"
        class="icon-button"
        data-testid="clip-item-delete"
        aria-label="Delete clip"
        title="Delete clip"
        onClick={() => setConfirming(true)}
      >
        <TrashIcon />
      </button>
      {confirming ? (
        <ConfirmDialog
          title="Delete this clip?"
          message={`“${excerpt}” (${formatAudioDuration(clip.duration_s)}) will be deleted for good.`}
          confirmLabel="Delete"
          onCancel={() => setConfirming(false)}
          onConfirm={() => {
            setConfirming(false);
            player.stopIf(`clip:${clip.id}`);
            void cake.speech.deleteClip(clip.id);
          }}
        />
      ) : null}
    </li>
  );
}

function formatDate(rfc3339: string): string {
  const date = new Date(rfc3339);
  if (Number.isNaN(date.getTime())) return rfc3339;
  return date.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
}
