import type { ComponentChildren } from 'preact';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { type Fact, Facts } from './ui';
import { TextField } from './ui-forms';

export interface ConfirmOptions {
  title: string;
  /** What the action does, as label and value pairs (amount, payer, address…). */
  facts?: Fact[];
  /** What changes for the seller's money, in one sentence. */
  effect: ComponentChildren;
  confirmLabel: string;
  /** A text the seller must (or may) give with the action, such as a rejection reason. */
  input?: { label: string; hint?: string; required: boolean };
}

type ConfirmAnswer = false | { input: string };

/** A money action waits for this modal <dialog>: window.confirm shows no amounts and cannot be styled. */
export function useConfirm() {
  const [open, setOpen] = useState<{ options: ConfirmOptions; resolve: (answer: ConfirmAnswer) => void }>();
  const ask = useCallback(
    (options: ConfirmOptions) =>
      new Promise<ConfirmAnswer>((resolve) => {
        setOpen({ options, resolve });
      }),
    [],
  );
  const close = (answer: ConfirmAnswer) => {
    open?.resolve(answer);
    setOpen(undefined);
  };
  const dialog = open ? <ConfirmDialog options={open.options} onAnswer={close} /> : null;
  return { ask, dialog };
}

function ConfirmDialog(props: { options: ConfirmOptions; onAnswer: (answer: ConfirmAnswer) => void }) {
  const { options } = props;
  const ref = useRef<HTMLDialogElement>(null);
  const [input, setInput] = useState('');
  const [inputError, setInputError] = useState<string>();
  useEffect(() => {
    const opener = document.activeElement as HTMLElement | null;
    const element = ref.current;
    if (element && !element.open) element.showModal();
    return () => opener?.focus?.();
  }, []);
  const confirm = (event: Event) => {
    event.preventDefault();
    if (options.input?.required && input.trim() === '') {
      setInputError(`${options.input.label} is required`);
      document.getElementById('confirm-input')?.focus();
      return;
    }
    props.onAnswer({ input: input.trim() });
  };
  return (
    <dialog
      ref={ref}
      aria-labelledby="confirm-title"
      aria-describedby="confirm-effect"
      onCancel={(event) => {
        event.preventDefault();
        props.onAnswer(false);
      }}
    >
      <article>
        <form method="dialog" onSubmit={confirm} noValidate>
          <h2 id="confirm-title">{options.title}</h2>
          <Facts facts={options.facts ?? []} testId="confirm-facts" />
          <p id="confirm-effect" class="effect">
            {options.effect}
          </p>
          {options.input && (
            <TextField
              id="confirm-input"
              label={options.input.label}
              hint={options.input.hint}
              required={options.input.required}
              error={inputError}
              value={input}
              onValue={(value) => {
                setInputError(undefined);
                setInput(value);
              }}
            />
          )}
          <footer class="actions">
            <button type="button" class="secondary outline" onClick={() => props.onAnswer(false)}>
              Cancel
            </button>
            <button type="submit">{options.confirmLabel}</button>
          </footer>
        </form>
      </article>
    </dialog>
  );
}
