// Pictures attached in the composer before a message is sent. Each is kept
// by the backend at once (`add_picture`, which checks it is a picture) and
// shown as a thumbnail; the message then names it by id. Thumbnails of
// stored pictures are fetched once and remembered for the session.

import type { Api } from "../api/commands";
import type { PictureSource } from "../api/types";
import { bytesToBase64 } from "../lib/base64";
import { effectiveModelId, selectedConversation, type AppState, type ComposerPicture } from "./app-state";
import type { Notices } from "./notices";
import type { Store } from "./store";

/** The file endings of the pictures Cake reads (the desktop window's drops are told apart by them). */
const PICTURE_ENDINGS = [".png", ".jpg", ".jpeg", ".webp", ".gif"];

/** Whether the path `name` ends like a picture file. */
export function looksLikePicture(name: string): boolean {
  const lower = name.toLowerCase();
  return PICTURE_ENDINGS.some((ending) => lower.endsWith(ending));
}

export function createPictureActions(store: Store<AppState>, api: Api, notices: Notices) {
  let nextKey = 1;
  const thumbnails = new Map<string, Promise<string>>();

  /** Keep one picture and show it in the composer; a refusal is reported and the picture dropped. */
  async function attach(name: string, source: () => Promise<PictureSource>): Promise<void> {
    const key = nextKey++;
    store.update((state) => ({ attached: [...state.attached, { key, name, id: null }] }));
    try {
      const picture = await api.addPicture(await source());
      store.update((state) => ({
        attached: state.attached.map((p) => (p.key === key ? { ...p, id: picture.id } : p)),
      }));
    } catch (error) {
      store.update((state) => ({ attached: state.attached.filter((p) => p.key !== key) }));
      notices.report(error);
    }
  }

  /**
   * Whether the selected conversation's model reads pictures; if not, the
   * person is told so (nothing is kept).
   */
  function modelReadsPictures(): boolean {
    const state = store.get();
    const modelId = effectiveModelId(state, selectedConversation(state));
    const model = state.models.find((m) => m.id === modelId);
    if (!model || model.reads_pictures === true) return true; // no model yet: sending will say so
    notices.report(
      new Error(`${model.name} reads text only: choose a model that reads pictures (such as Gemma 3) to send one.`),
    );
    return false;
  }

  /** Attach uploaded files (the browser's drops, pastes and file input), in order. */
  async function attachFiles(files: readonly File[]): Promise<void> {
    if (files.length === 0 || !modelReadsPictures()) return;
    await Promise.all(
      files.map((file) =>
        attach(file.name || "pasted picture", async () => {
          let bytes: Uint8Array;
          try {
            bytes = new Uint8Array(await file.arrayBuffer());
          } catch (error) {
            throw new Error(`Cannot read ${file.name}: ${error instanceof Error ? error.message : String(error)}`);
          }
          return { file_base64: bytesToBase64(bytes), file_name: file.name || "pasted picture" };
        }),
      ),
    );
  }

  /** Attach files of the serving machine (the desktop window's drops). */
  async function attachPaths(paths: readonly string[]): Promise<void> {
    if (paths.length === 0 || !modelReadsPictures()) return;
    await Promise.all(paths.map((path) => attach(path.split(/[\\/]/).pop() ?? path, async () => ({ path }))));
  }

  function remove(key: number): void {
    store.update((state) => ({ attached: state.attached.filter((p) => p.key !== key) }));
  }

  /** Empty the composer's pictures, handing back what it held. */
  function takeAll(): ComposerPicture[] {
    const taken = store.get().attached;
    store.update({ attached: [] });
    return taken;
  }

  /** Put back pictures taken for a message that was not sent (before any attached since). */
  function restore(pictures: ComposerPicture[]): void {
    store.update((state) => ({ attached: [...pictures, ...state.attached] }));
  }

  /** The `data:` URL of picture `id`'s thumbnail (fetched once; a failure is tried again next time). */
  function thumbnail(id: string): Promise<string> {
    let found = thumbnails.get(id);
    if (!found) {
      found = api.pictureThumbnail(id).then(({ jpeg_base64 }) => `data:image/jpeg;base64,${jpeg_base64}`);
      found.catch(() => thumbnails.delete(id));
      thumbnails.set(id, found);
    }
    return found;
  }

  return { attachFiles, attachPaths, remove, takeAll, restore, thumbnail };
}

export type PictureActions = ReturnType<typeof createPictureActions>;
