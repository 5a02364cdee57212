// Gives components the app's actions (`useCake`) and its current state
// (`useAppState`, which re-renders the component on every state change).

import { createContext } from "preact";
import { useContext } from "preact/hooks";
import type { Cake } from "../state";
import type { AppState } from "../state/app-state";
import { useStore } from "./useStore";

export const CakeContext = createContext<Cake | null>(null);

export function useCake(): Cake {
  const cake = useContext(CakeContext);
  if (!cake) throw new Error("useCake() needs a <CakeContext.Provider> above it.");
  return cake;
}

export function useAppState(): AppState {
  return useStore(useCake().store);
}
