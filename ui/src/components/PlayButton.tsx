// Play / pause for a voice or clip.

import { PauseIcon, PlayIcon } from "./icons";

interface Props {
  playing: boolean;
  loading: boolean;
  onClick: () => void;
  /** What plays, for the accessible name ("Play Alice"). */
  label: string;
  testid: string;
  /** Show "Play"/"Pause" beside the icon. */
  text?: boolean;
}

export function PlayButton({ playing, loading, onClick, label, testid, text = false }: Props) {
  const action = playing ? "Pause" : "Play";
  return (
    <button
      type="button"
      class={`play-button${text ? "" : " icon-button"}${playing ? " playing" : ""}`}
      data-testid={testid}
      aria-label={`${action} ${label}`}
      aria-pressed={playing}
      aria-busy={loading}
      title={action}
      onClick={onClick}
    >
      {playing ? <PauseIcon /> : <PlayIcon />}
      {text ? action : null}
    </button>
  );
}
