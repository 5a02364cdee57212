// The generation settings of the Speech screen: CFG scale and diffusion
// steps (empty = the model's defaults, which depend on what it speaks in),
// seed (empty = random) and an optional length limit.

import type { ModelVoiceKind } from "../api/types";
import { SPEECH_DEFAULTS, type SpeechSettingsForm } from "../lib/speech";
import { speechVoiceKind } from "../state/app-state";
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

/** The fields, with the defaults of a model that speaks in `kind`. */
function fields(kind: ModelVoiceKind): FieldSpec[] {
  const defaults = SPEECH_DEFAULTS[kind];
  return [
    {
      key: "cfgScale",
      testid: "speech-cfg",
      label: "CFG scale",
      min: 0.1,
      step: 0.1,
      placeholder: String(defaults.cfgScale),
      hint: `how closely the voice is followed (default ${defaults.cfgScale})`,
    },
    {
      key: "steps",
      testid: "speech-steps",
      label: "Steps",
      min: 1,
      step: 1,
      placeholder: String(defaults.steps),
      hint: `${kind === "transcribed_prompt" ? "flow steps" : "diffusion steps per frame"}; more is slower (default ${defaults.steps})`,
    },
    {
      key: "seed",
      testid: "speech-seed",
      label: "Seed",
      min: 0,
      step: 1,
      placeholder: "random",
      hint: "empty = random",
    },
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
}

export function SpeechSettings() {
  const state = useAppState();
  const cake = useCake();
  const form = state.speechForm;
  return (
    <details class="sampling-panel speech-settings" data-testid="speech-settings" open>
      <summary>Settings</summary>
      <div class="sampling-grid">
        {fields(speechVoiceKind(state)).map((field) => (
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
