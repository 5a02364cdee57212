// The colour theme: the person's choice (follow the system, light or dark)
// and the theme in effect, which the stylesheet reads from
// `<html data-theme>`.

export type ThemeChoice = "system" | "light" | "dark";
export type Theme = "light" | "dark";

export const THEME_CHOICES: readonly ThemeChoice[] = ["system", "light", "dark"];

export function isThemeChoice(value: unknown): value is ThemeChoice {
  return typeof value === "string" && (THEME_CHOICES as readonly string[]).includes(value);
}

/** The theme in effect for `choice` when the system asks for dark or not. */
export function effectiveTheme(choice: ThemeChoice, systemDark: boolean): Theme {
  if (choice === "system") return systemDark ? "dark" : "light";
  return choice;
}

/** The choice after `choice` when the theme button is pressed: system → light → dark → system. */
export function nextThemeChoice(choice: ThemeChoice): ThemeChoice {
  return THEME_CHOICES[(THEME_CHOICES.indexOf(choice) + 1) % THEME_CHOICES.length];
}

/** The system's dark-colours setting, to read or watch (null where there is none). */
export function systemDarkQuery(): MediaQueryList | null {
  return typeof matchMedia === "undefined" ? null : matchMedia("(prefers-color-scheme: dark)");
}

/** Whether the system asks for dark colours now (false where it cannot say). */
export function systemPrefersDark(): boolean {
  return systemDarkQuery()?.matches ?? false;
}

/** Puts `theme` on the page. */
export function applyTheme(theme: Theme, root: HTMLElement = document.documentElement): void {
  root.dataset.theme = theme;
}
