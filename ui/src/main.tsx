// Entry point: build the app state against the real API (speech heard
// through the live player as it is made), render, and load the first data
// (models, conversations, app info).

import { render } from "preact";
import { api } from "./api/commands";
import { App } from "./components/App";
import { CakeContext } from "./components/context";
import { liveAudio } from "./components/live-audio";
import { createCake } from "./state";
import { applyTheme, effectiveTheme, systemPrefersDark } from "./lib/theme";
import { browserStorage } from "./state/prefs";
import "./styles.css";

const cake = createCake(api, browserStorage(), liveAudio);
// The theme goes on the page before the first paint (the app keeps it up to date after).
applyTheme(effectiveTheme(cake.store.get().prefs.theme, systemPrefersDark()));

render(
  <CakeContext.Provider value={cake}>
    <App />
  </CakeContext.Provider>,
  document.getElementById("app")!,
);

void cake.start();
