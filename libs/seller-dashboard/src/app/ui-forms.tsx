import type { ComponentChildren, InputHTMLAttributes, JSX, SelectHTMLAttributes } from 'preact';
import { useState } from 'preact/hooks';

/** A form's values, and a change to some of them. */
export function useForm<T>(initial: T | (() => T)) {
  const [values, setValues] = useState<T>(initial);
  return [values, (patch: Partial<T>) => setValues((current) => ({ ...current, ...patch }))] as const;
}

/** The props of a text or select field bound to a key of a form's values: id (`prefix-key`), value, error, change. */
export function fieldsOf<T>(
  prefix: string,
  values: T,
  set: (patch: Partial<T>) => void,
  errors: Record<string, string | undefined> = {},
) {
  return (key: keyof T & string, id = `${prefix}-${key}`) => ({
    id,
    error: errors[key],
    value: String(values[key] ?? ''),
    onValue: (value: string) => set({ [key]: value } as Partial<T>),
  });
}

export function Field(props: {
  id: string;
  label: string;
  error?: string;
  hint?: string;
  required?: boolean;
  /** A live note under the field (a name checked as it is typed). */
  status?: string;
  children: (aria: JSX.HTMLAttributes<HTMLInputElement>) => ComponentChildren;
}) {
  const describedBy = [
    props.hint && `${props.id}-hint`,
    props.status && `${props.id}-status`,
    props.error && `${props.id}-error`,
  ]
    .filter(Boolean)
    .join(' ');
  return (
    <div class="field">
      <label for={props.id}>
        {props.label}
        {/* Seen only: assistive technology hears aria-required on the control instead. */}
        {props.required && (
          <span class="required" aria-hidden="true" title="required">
            {' '}
            *
          </span>
        )}
      </label>
      {props.children({
        id: props.id,
        'aria-required': props.required ? true : undefined,
        'aria-invalid': props.error ? true : undefined,
        'aria-describedby': describedBy || undefined,
      })}
      {props.hint && <small id={`${props.id}-hint`}>{props.hint}</small>}
      {'status' in props && (
        <small id={`${props.id}-status`} aria-live="polite" class="field-status">
          {props.status}
        </small>
      )}
      {props.error && (
        <small id={`${props.id}-error`} class="field-error">
          {props.error}
        </small>
      )}
    </div>
  );
}

/** A Field around one control: the control's value, and each change as the value now in it. */
type ValueFieldProps = Omit<Parameters<typeof Field>[0], 'children'> & {
  value: string;
  onValue: (value: string) => void;
};

/** A Field with one text input: its value, and each change as the text now in it. */
export function TextField(
  props: ValueFieldProps & {
    /** The input's other attributes (name, type, placeholder, limits). */
    input?: Omit<InputHTMLAttributes<HTMLInputElement>, 'value' | 'onInput'>;
  },
) {
  const { value, onValue, input, ...field } = props;
  return (
    <Field {...field}>
      {(aria) => (
        <input
          {...aria}
          {...input}
          value={value}
          onInput={(e) => onValue((e.target as HTMLInputElement).value)}
        />
      )}
    </Field>
  );
}

/** A Field with one select: its options (values, or values and labels), its value, and each change. */
export function SelectField(
  props: ValueFieldProps & {
    /** The select's other attributes (disabled). */
    select?: Omit<SelectHTMLAttributes<HTMLSelectElement>, 'value' | 'onChange'>;
    options?: Array<string | [value: string, label: string]>;
    /** Options written out, before `options`. */
    children?: ComponentChildren;
  },
) {
  const { value, onValue, select, options = [], children, ...field } = props;
  return (
    <Field {...field}>
      {(aria) => (
        <select
          {...(aria as object)}
          {...select}
          value={value}
          onChange={(e) => onValue((e.target as HTMLSelectElement).value)}
        >
          {children}
          {options.map((option) => {
            const [optionValue, label] = typeof option === 'string' ? [option, option] : option;
            return (
              <option key={optionValue} value={optionValue}>
                {label}
              </option>
            );
          })}
        </select>
      )}
    </Field>
  );
}
