// A labelled progress bar; `fraction` null shows an indeterminate bar.

interface Props {
  fraction: number | null;
  label: string;
}

export function ProgressBar({ fraction, label }: Props) {
  const percent = fraction === null ? null : Math.round(Math.min(Math.max(fraction, 0), 1) * 100);
  return (
    <div
      class={`progress${percent === null ? " indeterminate" : ""}`}
      role="progressbar"
      aria-label={label}
      aria-valuemin={0}
      aria-valuemax={100}
      aria-valuenow={percent ?? undefined}
    >
      <div class="progress-fill" style={percent === null ? undefined : { width: `${percent}%` }} />
    </div>
  );
}
