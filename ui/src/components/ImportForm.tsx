// Import a model file or folder by its path on the serving machine. In the
// desktop window it also offers the system's file and folder pickers.

import { useState } from "preact/hooks";
import { nativeFiles } from "../transport";
import { useAppState, useCake } from "./context";
import { LabeledInputRow } from "./LabeledInputRow";

export function ImportForm() {
  const state = useAppState();
  const cake = useCake();
  const [path, setPath] = useState("");

  async function importPath(value: string) {
    const model = await cake.models.importPath(value);
    if (model) setPath("");
  }

  async function pick(kind: "file" | "folder") {
    try {
      const picked = await nativeFiles?.pick(kind);
      if (picked) await importPath(picked);
    } catch (error) {
      cake.notices.report(error);
    }
  }

  return (
    <form
      class="panel-form"
      onSubmit={(event) => {
        event.preventDefault();
        void importPath(path);
      }}
    >
      <LabeledInputRow
        id="import-path"
        label="Import a model from this machine"
        placeholder="/path/to/model.gguf or model folder"
        value={path}
        onInput={setPath}
        busy={state.importing}
        buttonLabel={state.importing ? "Importing…" : "Import"}
        inputTestId="import-path"
        buttonTestId="import-button"
      />
      {nativeFiles ? (
        <div class="form-row">
          <button type="button" onClick={() => pick("file")} disabled={state.importing}>
            Choose file…
          </button>
          <button type="button" onClick={() => pick("folder")} disabled={state.importing}>
            Choose folder…
          </button>
          <span class="muted small">or drop model files onto this window</span>
        </div>
      ) : null}
    </form>
  );
}
