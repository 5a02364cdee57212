// Import a model file or folder by its path on the serving machine. In the
// desktop window it also offers the system's file and folder pickers.

import { useState } from "preact/hooks";
import { nativeFiles } from "../transport";
import { useAppState, useCake } from "./context";

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
      <label for="import-path">Import a model from this machine</label>
      <div class="form-row">
        <input
          id="import-path"
          type="text"
          data-testid="import-path"
          placeholder="/path/to/model.gguf or model folder"
          value={path}
          spellcheck={false}
          autocomplete="off"
          onInput={(event) => setPath(event.currentTarget.value)}
        />
        <button type="submit" data-testid="import-button" disabled={state.importing || path.trim() === ""}>
          {state.importing ? "Importing…" : "Import"}
        </button>
      </div>
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
