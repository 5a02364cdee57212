// Actions on the model library: list, load, unload, import, delete, and
// download from Hugging Face with a cancellable progress stream (a whole
// repository, or one GGUF file found by searching the hub).

import type { Api } from "../api/commands";
import type { HubFiles, HubModel, ModelEntry } from "../api/types";
import type { Store } from "./store";
import type { AppState } from "./app-state";
import type { Notices } from "./notices";
import { isAbortError } from "../transport";
import { explainFailure } from "../lib/errors";

export function createModelActions(store: Store<AppState>, api: Api, notices: Notices) {
  let downloadAbort: AbortController | null = null;

  async function refresh(): Promise<void> {
    try {
      const { models, loaded } = await api.listModels();
      store.update({ models, loadedModelId: loaded, modelsReady: true });
    } catch (error) {
      store.update({ modelsReady: true });
      notices.report(error);
    }
  }

  async function load(id: string): Promise<void> {
    if (store.get().loading) return; // one load at a time
    store.update({ loading: { id, fraction: 0, message: "Starting…" } });
    try {
      const model = await api.loadModel(id, ({ fraction, message }) =>
        store.update({ loading: { id, fraction, message } }),
      );
      store.update({ loadedModelId: model.id });
    } catch (error) {
      notices.report(error);
    } finally {
      store.update({ loading: null });
    }
  }

  async function unload(): Promise<void> {
    try {
      await api.unloadModel();
      store.update({ loadedModelId: null });
    } catch (error) {
      notices.report(error);
    }
  }

  /** Add a model file or folder on the serving machine; resolves with it, or null on failure. */
  async function importPath(path: string): Promise<ModelEntry | null> {
    const trimmed = path.trim();
    if (trimmed === "") return null;
    store.update({ importing: true });
    try {
      const model = await api.importModel(trimmed);
      await refresh();
      return model;
    } catch (error) {
      notices.report(error);
      return null;
    } finally {
      store.update({ importing: false });
    }
  }

  async function remove(id: string): Promise<void> {
    try {
      await api.deleteModel(id);
    } catch (error) {
      notices.report(error);
    }
    await refresh();
  }

  /** Download `repoId`'s model, or its GGUF `file`; resolves with the model (null if it failed). */
  async function download(repoId: string, file?: string): Promise<ModelEntry | null> {
    const trimmed = repoId.trim();
    if (trimmed === "" || store.get().download) return null;
    const controller = new AbortController();
    downloadAbort = controller;
    store.update({ download: { repoId: trimmed, progress: null }, downloadFailure: null });
    try {
      const model = await api.downloadModel(
        trimmed,
        (progress) => store.update({ download: { repoId: trimmed, progress } }),
        controller.signal,
        file,
      );
      await refresh();
      return model;
    } catch (error) {
      notices.report(error); // a cancel is not reported
      if (!isAbortError(error)) store.update({ downloadFailure: explainFailure(error) });
      return null;
    } finally {
      downloadAbort = null;
      store.update({ download: null });
    }
  }

  /** Download the text tokenizer a VibeVoice folder lacks (progress as a download's); resolves with the model. */
  async function fetchSpeechTokenizer(model: ModelEntry): Promise<ModelEntry | null> {
    if (store.get().download) return null;
    const controller = new AbortController();
    downloadAbort = controller;
    const repoId = `${model.name}'s tokenizer`;
    store.update({ download: { repoId, progress: null }, downloadFailure: null });
    try {
      const fetched = await api.fetchSpeechTokenizer(
        model.id,
        (progress) => store.update({ download: { repoId, progress } }),
        controller.signal,
      );
      await refresh();
      return fetched;
    } catch (error) {
      notices.report(error);
      return null;
    } finally {
      downloadAbort = null;
      store.update({ download: null });
    }
  }

  function cancelDownload(): void {
    downloadAbort?.abort();
  }

  /** Hub repositories matching `query`; null (and the reason shown) if the hub cannot be asked. */
  async function searchHub(query: string): Promise<HubModel[] | null> {
    try {
      return (await api.searchHub(query)).models;
    } catch (error) {
      notices.report(error);
      return null;
    }
  }

  /** A hub repository's GGUF files; null (and the reason shown) if they cannot be listed. */
  async function hubFiles(repoId: string): Promise<HubFiles | null> {
    try {
      return await api.hubFiles(repoId);
    } catch (error) {
      notices.report(error);
      return null;
    }
  }

  return {
    refresh,
    load,
    unload,
    importPath,
    remove,
    download,
    fetchSpeechTokenizer,
    cancelDownload,
    searchHub,
    hubFiles,
  };
}

export type ModelActions = ReturnType<typeof createModelActions>;
