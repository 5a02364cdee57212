// Download a model from Hugging Face by its id, with live progress.

import { useState } from "preact/hooks";
import { useAppState, useCake } from "./context";
import { DownloadProgress } from "./DownloadProgress";
import { LabeledInputRow } from "./LabeledInputRow";

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
      <LabeledInputRow
        id="download-repo"
        label="Download from Hugging Face by id"
        placeholder="e.g. Qwen/Qwen2.5-0.5B"
        value={repoId}
        onInput={setRepoId}
        busy={state.download !== null}
        buttonLabel="Download"
        inputTestId="download-repo"
        buttonTestId="download-button"
      />
      {state.download ? <DownloadProgress download={state.download} /> : null}
    </form>
  );
}
