// A labelled one-line text field with the form's submit button beside it,
// disabled while the field is blank or the form is busy (the Models
// screen's download and import forms).

interface Props {
  id: string;
  label: string;
  placeholder: string;
  value: string;
  onInput: (value: string) => void;
  /** The form's work is under way: the button waits. */
  busy: boolean;
  buttonLabel: string;
  inputTestId: string;
  buttonTestId: string;
}

export function LabeledInputRow(props: Props) {
  return (
    <>
      <label for={props.id}>{props.label}</label>
      <div class="form-row">
        <input
          id={props.id}
          type="text"
          data-testid={props.inputTestId}
          placeholder={props.placeholder}
          value={props.value}
          spellcheck={false}
          autocomplete="off"
          onInput={(event) => props.onInput(event.currentTarget.value)}
        />
        <button type="submit" data-testid={props.buttonTestId} disabled={props.busy || props.value.trim() === ""}>
          {props.buttonLabel}
        </button>
      </div>
    </>
  );
}
