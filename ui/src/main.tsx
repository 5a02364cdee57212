// Entry point: build the app state against the real API, render, and load
// the first data (models, conversations, app info).

import { render } from "preact";
import { api } from "./api/commands";
import { App } from "./components/App";
import { CakeContext } from "./components/context";
import { createCake } from "./state";
import { browserStorage } from "./state/prefs";
import "./styles.css";

const cake = createCake(api, browserStorage());

render(
  <CakeContext.Provider value={cake}>
    <App />
  </CakeContext.Provider>,
  document.getElementById("app")!,
);

void cake.start();
