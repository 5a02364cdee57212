// Download a model from Hugging Face by its id, with live progress.

import { useState } from "preact/hooks";
import { useAppState, useCake } from "./context";
import { DownloadProgress } from "./DownloadProgress";

export function DownloadForm() {
  const state = useAppState();
  const cake = useCake();
  const [repoId, setRepoId] = useState("");

  return (
    <form
      class="panel-form"
      onSubmit={(event) => {
        event.preventDefault();
        void cake.models.download(repoId).then((model) => model && setRepoId(""));
      }}
    >
      <label for="download-repo">Download from Hugging Face</label>
      <div class="form-row">
        <input
          id="download-repo"
          type="text"
          data-testid="download-repo"
          placeholder="org/model, e.g. Qwen/Qwen2.5-0.5B-Instruct"
          value={repoId}
          spellcheck={false}
          autocomplete="off"
          onInput={(event) => setRepoId(event.currentTarget.value)}
        />
        <button type="submit" data-testid="download-button" disabled={state.download !== null || repoId.trim() === ""}>
          Download
        </button>
      </div>
      {state.download ? <DownloadProgress download={state.download} /> : null}
    </form>
  );
}
