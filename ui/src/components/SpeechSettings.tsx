// The generation settings of the Speech screen: CFG scale, diffusion steps,
// seed (empty = random) and an optional length limit.

import { DEFAULT_CFG_SCALE, DEFAULT_STEPS, type SpeechSettingsForm } from "../lib/speech";
import { useAppState, useCake } from "./context";

interface FieldSpec {
  key: keyof SpeechSettingsForm;
  testid: string;
  label: string;
  min: number;
  step: number | "any";
  placeholder: string;
  hint: string;
}

const FIELDS: FieldSpec[] = [
  {
    key: "cfgScale",
    testid: "speech-cfg",
    label: "CFG scale",
    min: 0.1,
    step: 0.1,
    placeholder: String(DEFAULT_CFG_SCALE),
    hint: `how closely the voices are followed (default ${DEFAULT_CFG_SCALE})`,
  },
  {
    key: "steps",
    testid: "speech-steps",
    label: "Steps",
    min: 1,
    step: 1,
    placeholder: String(DEFAULT_STEPS),
    hint: `diffusion steps per frame; more is slower (default ${DEFAULT_STEPS})`,
  },
  { key: "seed", testid: "speech-seed", label: "Seed", min: 0, step: 1, placeholder: "random", hint: "empty = random" },
  {
    key: "maxSeconds",
    testid: "speech-max-seconds",
    label: "Max seconds",
    min: 1,
    step: "any",
    placeholder: "no limit",
    hint: "stop after this much audio",
  },
];

export function SpeechSettings() {
  const state = useAppState();
  const cake = useCake();
  const form = state.speechForm;
  return (
    <details class="sampling-panel speech-settings" data-testid="speech-settings" open>
      <summary>Settings</summary>
      <div class="sampling-grid">
        {FIELDS.map((field) => (
          <label key={field.key} class="field">
            <span class="field-label">{field.label}</span>
            <input
              type="number"
              data-testid={field.testid}
              min={field.min}
              step={field.step}
              placeholder={field.placeholder}
              value={form[field.key]}
              disabled={state.speaking !== null}
              onInput={(event) => cake.speech.edit({ [field.key]: event.currentTarget.value })}
            />
            <span class="field-hint">{field.hint}</span>
          </label>
        ))}
      </div>
    </details>
  );
}
