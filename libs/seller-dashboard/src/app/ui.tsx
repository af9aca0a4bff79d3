import type { ComponentChildren, JSX } from 'preact';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { plainMessage } from './api';
import { href, navigate } from './router';

export function Link(props: { to: string; children: ComponentChildren; class?: string; current?: boolean }) {
  return (
    <a
      href={href(props.to)}
      class={props.class}
      aria-current={props.current ? 'page' : undefined}
      onClick={(event) => {
        if (event.metaKey || event.ctrlKey || event.shiftKey || event.button !== 0) return;
        event.preventDefault();
        navigate(props.to);
      }}
    >
      {props.children}
    </a>
  );
}

export function Loading(props: { what: string }) {
  return (
    <p aria-busy="true" role="status">
      Loading {props.what}…
    </p>
  );
}

export function Empty(props: { children: ComponentChildren }) {
  return <p class="empty">{props.children}</p>;
}

export function ErrorNote(props: { error: unknown; onRetry?: () => void }) {
  if (!props.error) return null;
  return (
    <p class="error-note" role="alert">
      {plainMessage(props.error)}{' '}
      {props.onRetry && (
        <button type="button" class="outline secondary small" onClick={props.onRetry}>
          Try again
        </button>
      )}
    </p>
  );
}

export function Notice(props: { children: ComponentChildren }) {
  return (
    <p class="notice" role="status">
      {props.children}
    </p>
  );
}

export function CopyButton(props: { text: string; label: string }) {
  const [copied, setCopied] = useState(false);
  return (
    <button
      type="button"
      class="outline small"
      aria-label={`Copy ${props.label}`}
      onClick={async () => {
        try {
          await navigator.clipboard.writeText(props.text);
          setCopied(true);
          setTimeout(() => setCopied(false), 2000);
        } catch {
          setCopied(false);
        }
      }}
    >
      {copied ? 'Copied' : 'Copy'}
      <span class="visually-hidden" aria-live="polite">
        {copied ? `${props.label} copied` : ''}
      </span>
    </button>
  );
}

/** A secret shown once (sk_, whsec_): copy it now, it is not shown again. */
export function SecretOnce(props: {
  label: string;
  value: string;
  onDone: () => void;
  children?: ComponentChildren;
}) {
  const ref = useRef<HTMLElement>(null);
  useEffect(() => ref.current?.focus(), []);
  return (
    <article class="secret-once" aria-labelledby="secret-once-title" tabIndex={-1} ref={ref}>
      <h3 id="secret-once-title">Your {props.label}</h3>
      <p class="warning">
        <strong>Copy it now and keep it safe: it is shown only this once.</strong> Paygate stores only a hash
        of it. Anyone who has it can act as you; if you lose it, rotate it in Settings.
      </p>
      {props.children}
      <div class="secret-row">
        <code data-testid="secret-value">{props.value}</code>
        <CopyButton text={props.value} label={props.label} />
      </div>
      <button type="button" onClick={props.onDone}>
        I have stored it
      </button>
    </article>
  );
}

export function StatusBadge(props: { status: string }) {
  const tone =
    /ACTIVE|completed|delivered|settled|approved/i.test(props.status) && !/INACTIVE/.test(props.status)
      ? 'good'
      : /FAILED|SUSPENDED|failed|rejected|reversed/i.test(props.status)
        ? 'bad'
        : 'neutral';
  return <span class={`badge ${tone}`}>{props.status.toLowerCase().replace(/_/g, ' ')}</span>;
}

export function Field(props: {
  id: string;
  label: string;
  error?: string;
  hint?: string;
  children: (aria: JSX.HTMLAttributes<HTMLInputElement>) => ComponentChildren;
}) {
  const describedBy = [props.hint && `${props.id}-hint`, props.error && `${props.id}-error`]
    .filter(Boolean)
    .join(' ');
  return (
    <div class="field">
      <label for={props.id}>{props.label}</label>
      {props.children({
        id: props.id,
        'aria-invalid': props.error ? true : undefined,
        'aria-describedby': describedBy || undefined,
      })}
      {props.hint && <small id={`${props.id}-hint`}>{props.hint}</small>}
      {props.error && (
        <small id={`${props.id}-error`} class="field-error">
          {props.error}
        </small>
      )}
    </div>
  );
}

/** Loads data for a view; `reload` fetches it again, `set` replaces it with what an action answered. */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[]) {
  const [state, setState] = useState<{ data?: T; error?: unknown; loading: boolean }>({ loading: true });
  const run = useCallback(() => {
    setState((s) => ({ ...s, loading: true, error: undefined }));
    load().then(
      (data) => setState({ data, loading: false }),
      (error) => setState({ error, loading: false }),
    );
  }, deps);
  useEffect(run, [run]);
  // What an action answered in place of fetching again (the saved object, as the API returned it).
  const set = useCallback((data: T) => setState({ data, loading: false }), []);
  return { ...state, reload: run, set };
}

/** Runs an action once at a time, keeping its error for the form. */
export function useAction() {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>();
  const run = useCallback(async <T,>(action: () => Promise<T>): Promise<T | undefined> => {
    setBusy(true);
    setError(undefined);
    try {
      return await action();
    } catch (caught) {
      setError(caught);
      return undefined;
    } finally {
      setBusy(false);
    }
  }, []);
  return { busy, error, setError, run };
}
