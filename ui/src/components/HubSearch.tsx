// Finding a GGUF model on the hub: search repositories by name, open one to
// see its GGUF files with their quantizations and sizes, and download one
// with the screen's usual progress.

import { useState } from "preact/hooks";
import type { HubFiles, HubModel } from "../api/types";
import { formatBytes } from "../lib/format";
import { useAppState, useCake } from "./context";
import { LabeledInputRow } from "./LabeledInputRow";

/** The repository opened from the results, and its files once listed. */
interface OpenRepo {
  repoId: string;
  files: HubFiles | null;
}

export function HubSearch() {
  const state = useAppState();
  const cake = useCake();
  const [query, setQuery] = useState("");
  const [searching, setSearching] = useState(false);
  const [results, setResults] = useState<HubModel[] | null>(null);
  const [open, setOpen] = useState<OpenRepo | null>(null);

  const search = async () => {
    setSearching(true);
    setOpen(null);
    setResults(await cake.models.searchHub(query));
    setSearching(false);
  };
  const openRepo = async (repoId: string) => {
    setOpen({ repoId, files: null });
    const files = await cake.models.hubFiles(repoId);
    setOpen((current) => (current?.repoId === repoId ? { repoId, files } : current));
  };

  return (
    <div class="hub-search">
      <form
        class="panel-form"
        onSubmit={(event) => {
          event.preventDefault();
          void search();
        }}
      >
        <LabeledInputRow
          id="hub-query"
          label="Search the hub for GGUF models"
          placeholder="e.g. llama 3.2 1b instruct"
          value={query}
          onInput={setQuery}
          busy={searching}
          buttonLabel="Search"
          inputTestId="hub-query"
          buttonTestId="hub-search"
        />
      </form>
      {searching ? <p class="muted small">Searching…</p> : null}
      {!searching && results?.length === 0 ? (
        <p class="muted small" data-testid="hub-no-results">
          No repository with GGUF files matches that.
        </p>
      ) : null}
      {!searching && results && results.length > 0 ? (
        <ul class="hub-results" aria-label="Repositories found">
          {results.map((model) => (
            <li key={model.repo_id}>
              <button
                type="button"
                class={`hub-repo${open?.repoId === model.repo_id ? " current" : ""}`}
                data-testid="hub-repo"
                aria-expanded={open?.repoId === model.repo_id}
                onClick={() => void openRepo(model.repo_id)}
              >
                <span class="hub-repo-name">{model.repo_id}</span>
                <span class="muted small">{model.downloads.toLocaleString("en")} downloads</span>
              </button>
              {open?.repoId === model.repo_id ? (
                <RepoFiles
                  repoId={model.repo_id}
                  files={open.files}
                  busy={state.download !== null}
                  inLibrary={(file) => state.models.some((m) => m.id === `hf:${model.repo_id}/${file}`)}
                  onDownload={(file) => void cake.models.download(model.repo_id, file)}
                />
              ) : null}
            </li>
          ))}
        </ul>
      ) : null}
    </div>
  );
}

interface FilesProps {
  repoId: string;
  files: HubFiles | null;
  busy: boolean;
  /** Whether the file is already a model of the library. */
  inLibrary: (file: string) => boolean;
  onDownload: (file: string) => void;
}

/** A repository's GGUF files, each with a Download button. */
function RepoFiles({ repoId, files, busy, inLibrary, onDownload }: FilesProps) {
  if (files === null) return <p class="muted small hub-files-status">Listing the files…</p>;
  return (
    <div class="hub-files" data-testid="hub-files">
      {files.files.length === 0 ? <p class="muted small">{repoId} has no single-file GGUF model.</p> : null}
      <ul>
        {files.files.map((file) => (
          <li key={file.name} class="hub-file" data-testid="hub-file" data-file={file.name}>
            <span class="hub-file-name" title={file.name}>
              {file.name}
            </span>
            <span class="badge">{file.quantization ?? "?"}</span>
            <span class="muted small">{formatBytes(file.size_bytes)}</span>
            {inLibrary(file.name) ? (
              <span class="muted small" data-testid="hub-file-in-library">
                In library
              </span>
            ) : (
              <button
                type="button"
                class="small"
                data-testid="hub-file-download"
                disabled={busy}
                onClick={() => onDownload(file.name)}
              >
                Download
              </button>
            )}
          </li>
        ))}
      </ul>
      {files.picture_reader ? (
        <p class="muted small" data-testid="hub-picture-reader">
          The picture reader ({files.picture_reader.name}, {formatBytes(files.picture_reader.size_bytes)}) downloads
          with the model.
        </p>
      ) : null}
      {files.split_files > 0 ? (
        <p class="muted small">
          {files.split_files} parts of split models are not listed: Cake reads models in one GGUF file.
        </p>
      ) : null}
    </div>
  );
}
