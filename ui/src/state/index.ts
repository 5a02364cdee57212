// Builds the app's state and actions in one place. The UI gets the result
// through context (components/context.ts); tests build it with a fake Api
// (and, for speech played as it is made, a fake live player).

import type { Api } from "../api/commands";
import { Store } from "./store";
import { initialState, type AppState, type View } from "./app-state";
import { createNotices } from "./notices";
import { createModelActions } from "./models";
import { createConversationActions } from "./conversations";
import { createChatActions } from "./chat";
import { createClusterActions } from "./cluster";
import { createSpeechActions, type LiveSpeech } from "./speech";
import { createPictureActions } from "./pictures";
import { loadPrefs, savePrefs, type KeyValueStorage, type Prefs } from "./prefs";
import { replyKey } from "../lib/conversation";

/** `live`: where speech plays while it is made; null: it is only heard once made. */
export function createCake(api: Api, storage: KeyValueStorage | null, live: LiveSpeech | null = null) {
  const store = new Store<AppState>(initialState(loadPrefs(storage)));
  const notices = createNotices(store);
  const models = createModelActions(store, api, notices);
  const conversations = createConversationActions(store, api, notices, storage);
  const speech = createSpeechActions(store, api, notices, live);
  // A conversation that reads its replies aloud hears each one once it is made.
  const chat = createChatActions(store, api, notices, conversations, (conversationId, index, text) => {
    if (conversations.get(conversationId)?.auto_read) void speech.readAloud(replyKey(conversationId, index), text);
  });
  const cluster = createClusterActions(store, api, notices);
  const pictures = createPictureActions(store, api, notices);

  return {
    store,
    notices,
    models,
    conversations,
    chat,
    cluster,
    speech,
    pictures,

    /** Fetch everything the first screen needs. */
    async start(): Promise<void> {
      const info = api.appInfo().then(
        (info) => store.update({ info }),
        (error) => notices.report(error),
      );
      // The cluster status only labels the sidebar button here: no error toast.
      await Promise.all([info, models.refresh(), conversations.restore(), cluster.refresh(true)]);
    },

    showView(view: View): void {
      store.update({ view, drawerOpen: false });
    },

    /**
     * Show or hide the sidebar: in a `narrow` window open or close the
     * drawer, in a wide one hide or show it for good (remembered).
     */
    toggleSidebar(narrow: boolean): void {
      if (narrow) store.update({ drawerOpen: !store.get().drawerOpen });
      else this.setPrefs({ sidebarHidden: !store.get().prefs.sidebarHidden });
    },

    /** Close the drawer (a conversation or screen was chosen in it). */
    closeDrawer(): void {
      if (store.get().drawerOpen) store.update({ drawerOpen: false });
    },

    setPrefs(change: Partial<Prefs>): void {
      const prefs = { ...store.get().prefs, ...change };
      store.update({ prefs });
      savePrefs(storage, prefs);
    },

    /** Delete a conversation, stopping its reply first if one is streaming. */
    async deleteConversation(id: string): Promise<void> {
      if (store.get().generatingId === id) chat.stop();
      await conversations.remove(id);
    },
  };
}

export type Cake = ReturnType<typeof createCake>;
