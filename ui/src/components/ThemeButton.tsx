// The theme button: each press goes from following the system to light, to
// dark, and back. It says which theme is chosen and what a press does.

import { nextThemeChoice, type ThemeChoice } from "../lib/theme";
import { useAppState, useCake } from "./context";
import { HalfIcon, MoonIcon, SunIcon } from "./icons";

const NAMES: Record<ThemeChoice, string> = { system: "as the system", light: "light", dark: "dark" };

export function ThemeButton() {
  const cake = useCake();
  const choice = useAppState().prefs.theme;
  const next = nextThemeChoice(choice);
  const label = `Theme: ${NAMES[choice]}. Press for ${NAMES[next]}.`;
  return (
    <button
      type="button"
      class="icon-button"
      data-testid="theme-button"
      data-theme-choice={choice}
      aria-label={label}
      title={label}
      onClick={() => cake.setPrefs({ theme: next })}
    >
      {choice === "light" ? <SunIcon /> : choice === "dark" ? <MoonIcon /> : <HalfIcon />}
    </button>
  );
}
