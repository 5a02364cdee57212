// The running download: file, bytes, speed, time left, and a Cancel button.

import { formatBytes, formatDuration, formatSpeed } from "../lib/format";
import type { DownloadState } from "../state/app-state";
import { useCake } from "./context";
import { ProgressBar } from "./ProgressBar";

export function DownloadProgress({ download }: { download: DownloadState }) {
  const cake = useCake();
  const progress = download.progress;
  const fraction = progress && progress.total_bytes > 0 ? progress.downloaded_bytes / progress.total_bytes : null;
  return (
    <div class="download-progress" data-testid="download-progress" aria-live="polite">
      <div class="progress-title">
        <span>
          Downloading <strong>{download.repoId}</strong>
          {progress?.file ? <span class="muted"> · {progress.file}</span> : null}
        </span>
        <button type="button" data-testid="download-cancel" onClick={() => cake.models.cancelDownload()}>
          Cancel
        </button>
      </div>
      <ProgressBar fraction={fraction} label={`Downloading ${download.repoId}`} />
      <div class="progress-detail muted">
        {progress ? (
          <>
            {formatBytes(progress.downloaded_bytes)} of {formatBytes(progress.total_bytes)} ·{" "}
            {formatSpeed(progress.bytes_per_s)} · {formatDuration(progress.eta_s)} left
          </>
        ) : (
          "Starting…"
        )}
      </div>
    </div>
  );
}
