// The collapsible sampling settings of a conversation, plus the reply length,
// context length and seed preferences, which belong to the user rather than
// the conversation.

import type { Sampling } from "../api/types";
import type { Prefs } from "../state/prefs";

interface Props {
  sampling: Sampling;
  prefs: Prefs;
  onSampling: (sampling: Sampling) => void;
  onPrefs: (change: Partial<Prefs>) => void;
}

interface FieldSpec {
  key: keyof Sampling;
  label: string;
  min: number;
  max?: number;
  step: number;
  hint: string;
}

const FIELDS: FieldSpec[] = [
  { key: "temperature", label: "Temperature", min: 0, max: 2, step: 0.05, hint: "0 always picks the likeliest token" },
  { key: "top_k", label: "Top-k", min: 0, step: 1, hint: "0 = off" },
  { key: "top_p", label: "Top-p", min: 0.01, max: 1, step: 0.01, hint: "1 = off" },
  { key: "min_p", label: "Min-p", min: 0, max: 1, step: 0.01, hint: "0 = off" },
  { key: "repeat_penalty", label: "Repeat penalty", min: 0.5, max: 2, step: 0.05, hint: "1 = off" },
];

/** The number typed into an input, or null while it is not a valid number. */
function numberFrom(input: HTMLInputElement, integer: boolean): number | null {
  const value = input.valueAsNumber;
  if (!Number.isFinite(value) || value < 0) return null;
  return integer ? Math.round(value) : value;
}

export function SamplingPanel({ sampling, prefs, onSampling, onPrefs }: Props) {
  return (
    <details class="sampling-panel" data-testid="sampling-panel">
      <summary>Sampling</summary>
      <div class="sampling-grid">
        {FIELDS.map((field) => (
          <label key={field.key} class="field">
            <span class="field-label">{field.label}</span>
            <input
              type="number"
              data-testid={`sampling-${field.key}`}
              min={field.min}
              max={field.max}
              step={field.step}
              value={sampling[field.key]}
              onInput={(event) => {
                const value = numberFrom(event.currentTarget, field.step === 1);
                if (value !== null) onSampling({ ...sampling, [field.key]: value });
              }}
            />
            <span class="field-hint">{field.hint}</span>
          </label>
        ))}
        <label class="field">
          <span class="field-label">Max tokens</span>
          <input
            type="number"
            data-testid="max-tokens"
            min={1}
            step={1}
            value={prefs.maxTokens}
            onInput={(event) => {
              const value = numberFrom(event.currentTarget, true);
              if (value !== null && value >= 1) onPrefs({ maxTokens: value });
            }}
          />
          <span class="field-hint">longest reply</span>
        </label>
        <label class="field">
          <span class="field-label">Context length</span>
          <input
            type="number"
            data-testid="context-length"
            min={16}
            step={1}
            placeholder="model's"
            value={prefs.contextLength ?? ""}
            onInput={(event) => {
              if (event.currentTarget.value.trim() === "") return onPrefs({ contextLength: null });
              const value = numberFrom(event.currentTarget, true);
              if (value !== null && value >= 16) onPrefs({ contextLength: value });
            }}
          />
          <span class="field-hint">tokens read; empty = the model's</span>
        </label>
        <label class="field">
          <span class="field-label">Seed</span>
          <input
            type="number"
            data-testid="sampling-seed"
            min={0}
            step={1}
            value={sampling.seed}
            disabled={prefs.freshSeed}
            onInput={(event) => {
              const value = numberFrom(event.currentTarget, true);
              if (value !== null) onSampling({ ...sampling, seed: value });
            }}
          />
          <span class="field-check">
            <input
              type="checkbox"
              id="fresh-seed"
              data-testid="fresh-seed"
              checked={prefs.freshSeed}
              onChange={(event) => onPrefs({ freshSeed: event.currentTarget.checked })}
            />
            <label for="fresh-seed">new seed every reply</label>
          </span>
        </label>
      </div>
    </details>
  );
}
