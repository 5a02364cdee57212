// Actions on the model library: list, load, unload, import, delete, and
// download from Hugging Face with a cancellable progress stream (a whole
// repository, or one GGUF file found by searching the hub).

import type { Api } from "../api/commands";
import type { DownloadProgressEvent, HubFiles, HubModel, ModelEntry } from "../api/types";
import type { Store } from "./store";
import type { AppState } from "./app-state";
import type { Notices } from "./notices";
import { isAbortError } from "../transport";
import { explainFailure } from "../lib/errors";

export function createModelActions(store: Store<AppState>, api: Api, notices: Notices) {
  let downloadAbort: AbortController | null = null;

  async function refresh(): Promise<void> {
    try {
      const { models, loaded, loaded_gpu } = await api.listModels();
      store.update({ models, loadedModelId: loaded, loadedGpu: loaded_gpu ?? null, modelsReady: true });
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
      await refresh(); // where its layers run
    } catch (error) {
      notices.report(error);
    } finally {
      store.update({ loading: null });
    }
  }

  async function unload(): Promise<void> {
    try {
      await api.unloadModel();
      store.update({ loadedModelId: null, loadedGpu: null });
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

  /**
   * Runs one download stream (`start`), its progress shown under `label`;
   * resolves with the model it made usable, or null if it failed (reported,
   * and kept for the welcome card when `remembered`) or was cancelled.
   */
  async function runDownload(
    label: string,
    start: (onProgress: (progress: DownloadProgressEvent) => void, signal: AbortSignal) => Promise<ModelEntry>,
    remembered: boolean,
  ): Promise<ModelEntry | null> {
    if (store.get().download) return null;
    const controller = new AbortController();
    downloadAbort = controller;
    store.update({ download: { repoId: label, progress: null }, downloadFailure: null });
    try {
      const model = await start(
        (progress) => store.update({ download: { repoId: label, progress } }),
        controller.signal,
      );
      await refresh();
      return model;
    } catch (error) {
      notices.report(error); // a cancel is not reported
      if (remembered && !isAbortError(error)) store.update({ downloadFailure: explainFailure(error) });
      return null;
    } finally {
      downloadAbort = null;
      store.update({ download: null });
    }
  }

  /** Download `repoId`'s model, or its GGUF `file`; resolves with the model (null if it failed). */
  async function download(repoId: string, file?: string): Promise<ModelEntry | null> {
    const trimmed = repoId.trim();
    if (trimmed === "") return null;
    return runDownload(trimmed, (onProgress, signal) => api.downloadModel(trimmed, onProgress, signal, file), true);
  }

  /** Download the text tokenizer a VibeVoice folder lacks (progress as a download's); resolves with the model. */
  function fetchSpeechTokenizer(model: ModelEntry): Promise<ModelEntry | null> {
    const label = `${model.name}'s tokenizer`;
    return runDownload(label, (onProgress, signal) => api.fetchSpeechTokenizer(model.id, onProgress, signal), false);
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
