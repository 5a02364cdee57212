// The theme in effect, following both the person's choice and, when that
// choice is "system", changes of the system's setting.

import { useEffect, useState } from "preact/hooks";
import { effectiveTheme, systemDarkQuery, systemPrefersDark, type Theme } from "../lib/theme";
import { useAppState } from "./context";

export function useTheme(): Theme {
  const choice = useAppState().prefs.theme;
  const [systemDark, setSystemDark] = useState(systemPrefersDark);
  useEffect(() => {
    const query = systemDarkQuery();
    if (!query) return;
    const onChange = () => setSystemDark(query.matches);
    query.addEventListener("change", onChange);
    return () => query.removeEventListener("change", onChange);
  }, []);
  return effectiveTheme(choice, systemDark);
}
