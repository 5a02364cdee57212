// The hook behind every store the UI watches (the app state, the players):
// a store's current state, re-rendering the component when it changes.

import { useEffect, useState } from "preact/hooks";
import type { Store } from "../state/store";

export function useStore<S>(store: Store<S>): S {
  const [state, setState] = useState(store.get());
  useEffect(() => {
    setState(store.get()); // catch changes made before subscribing
    return store.subscribe(() => setState(store.get()));
  }, [store]);
  return state;
}
