import { type ComponentChildren, Fragment } from 'preact';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, fieldErrors, plainMessage, type Query } from './api';
import { useDashboard } from './context';
import { checksummed, statusWords } from './format';
import { href, navigate } from './router';
import type { Page } from './types';

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

export function Loading(props: { what: string; slow?: boolean }) {
  return (
    <p aria-busy="true" role="status" class={props.slow ? 'slow' : undefined} data-testid="loading">
      {props.slow
        ? `Still loading ${props.what}: Paygate is answering slowly. Nothing is lost; it keeps trying.`
        : `Loading ${props.what}…`}
    </p>
  );
}

/** Paygate down or failing (no answer, a timeout, a 5xx): not the same as an empty account. */
function isOutage(error: unknown): boolean {
  return error instanceof ApiError && (error.status === 0 || error.status >= 500);
}

/** A view's data: loading, unavailable (not "nothing here"), or loaded; shown data stays, marked, if a refresh fails. */
export function LoadState<T>(props: {
  load: Loaded<T>;
  what: string;
  children?: (data: T) => ComponentChildren;
}) {
  const { load } = props;
  if (load.data !== undefined) {
    return (
      <>
        {load.error !== undefined && (
          <p class="stale" data-testid="stale">
            Could not refresh {props.what}: showing what was loaded at{' '}
            {load.loadedAt?.toISOString().slice(11, 16)} UTC.
          </p>
        )}
        {props.children?.(load.data)}
      </>
    );
  }
  if (load.error !== undefined) {
    if (!isOutage(load.error)) return <ErrorNote error={load.error} onRetry={load.reload} />;
    return (
      <div class="unavailable" data-testid="unavailable">
        <p>
          <strong>Your {props.what} cannot be shown right now</strong>: Paygate did not answer. This is not an
          empty account; nothing is lost. The page tries again by itself.
        </p>
        <button type="button" class="outline secondary small" onClick={load.reload}>
          Try again now
        </button>
      </div>
    );
  }
  return <Loading what={props.what} slow={load.slow} />;
}

/** The next page's button of a list read by cursor, shown while the last page says there is more. */
export function LoadMore(props: {
  load: Loaded<{ nextCursor?: string | null }>;
  onMore: (cursor: string) => void;
}) {
  const cursor = props.load.data?.nextCursor;
  if (!cursor) return null;
  return (
    <button type="button" class="outline" aria-busy={props.load.loading} onClick={() => props.onMore(cursor)}>
      Load more
    </button>
  );
}

export function Empty(props: { children: ComponentChildren }) {
  return <p class="empty">{props.children}</p>;
}

/** An amount with its label and what it means (a balance, a figure); `children` go between the two. */
export function Figure(props: {
  label: string;
  value: ComponentChildren;
  hint: ComponentChildren;
  testId?: string;
  hintTestId?: string;
  class?: string;
  children?: ComponentChildren;
}) {
  return (
    <article class={props.class}>
      <h3>{props.label}</h3>
      <p class="amount" data-testid={props.testId}>
        {props.value}
      </p>
      {props.children}
      <small data-testid={props.hintTestId}>{props.hint}</small>
    </article>
  );
}

/** `unlessOnAField`: not shown for an error the API names a field of (that field shows it). */
export function ErrorNote(props: { error: unknown; onRetry?: () => void; unlessOnAField?: boolean }) {
  if (!props.error) return null;
  if (props.unlessOnAField && Object.keys(fieldErrors(props.error)).length) return null;
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
      <h1 id="secret-once-title">Your {props.label}</h1>
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
  return <span class={`badge ${tone}`}>{statusWords(props.status)}</span>;
}

/** A label, its value, and the value's test id. */
export type Fact = [string, ComponentChildren, string?];

/** Label and value pairs as a description list; a pair given as false (or null, '') is left out. */
export function Facts(props: {
  facts: Array<Fact | false | null | undefined | ''>;
  class?: string;
  testId?: string;
}) {
  return (
    <dl class={props.class ?? 'facts'} data-testid={props.testId}>
      {props.facts.map(
        (fact) =>
          fact && (
            <Fragment key={fact[0]}>
              <dt>{fact[0]}</dt>
              <dd data-testid={fact[2]}>{fact[1]}</dd>
            </Fragment>
          ),
      )}
    </dl>
  );
}

/** A full address, checksummed (EIP-55), with a copy button. */
export function Address(props: { value: string; label: string }) {
  const shown = checksummed(props.value);
  return (
    <span class="copyable">
      <code class="wrap">{shown}</code> <CopyButton text={shown} label={props.label} />
    </span>
  );
}

export interface Loaded<T> {
  data?: T;
  error?: unknown;
  loading: boolean;
  /** Loading for longer than SLOW_MS. */
  slow: boolean;
  loadedAt?: Date;
  reload: () => void;
}

const SLOW_MS = 2500;
const REFRESH_EVENT = 'paygate:refresh';

/** Every live view loads its data again: after each action, and on the dashboard's refresh timer. */
export function refreshLiveViews(): void {
  window.dispatchEvent(new Event(REFRESH_EVENT));
}

/** Loads a view's data; `reload` fetches again, `set` takes an action's answer; live views also on refreshLiveViews. */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[], options: { live?: boolean } = {}) {
  const [state, setState] = useState<Omit<Loaded<T>, 'reload'>>({ loading: true, slow: false });
  const latest = useRef(0);
  const run = useCallback(() => {
    const call = ++latest.current;
    setState((s) => ({
      ...s,
      loading: true,
      slow: false,
      error: s.data === undefined ? undefined : s.error,
    }));
    const slowTimer = setTimeout(() => {
      if (call === latest.current) setState((s) => (s.loading ? { ...s, slow: true } : s));
    }, SLOW_MS);
    load()
      .then(
        (data) => {
          // An older call answering late must not replace a newer answer.
          if (call === latest.current) setState({ data, loading: false, slow: false, loadedAt: new Date() });
        },
        (error) => {
          if (call === latest.current) setState((s) => ({ ...s, error, loading: false, slow: false }));
        },
      )
      .finally(() => clearTimeout(slowTimer));
  }, deps);
  useEffect(() => {
    // A new query starts afresh (its rows are not the old query's).
    setState({ loading: true, slow: false });
    run();
  }, [run]);
  // A live view reads again on every refresh; any other view too while its last read failed (so an outage's
  // "cannot show" goes, and the banner with it, once the service answers, without a reload).
  const failed = state.error !== undefined;
  useEffect(() => {
    if (!options.live && !failed) return;
    window.addEventListener(REFRESH_EVENT, run);
    return () => window.removeEventListener(REFRESH_EVENT, run);
  }, [run, options.live, failed]);
  // What an action answered in place of fetching again (the saved object, as the API returned it).
  const set = useCallback(
    (data: T) => setState({ data, loading: false, slow: false, loadedAt: new Date() }),
    [],
  );
  return { ...state, reload: run, set };
}

/** GET `path` as a view's data (`live`: read again on every refresh). */
export function useGet<T>(path: string, options: { query?: Query; live?: boolean } = {}) {
  const { api } = useDashboard();
  const { query, live } = options;
  return useLoad(() => api.request<T>('GET', path, { query }), [path, JSON.stringify(query)], { live });
}

/** A list read by cursor (`param`): the rows so far, live on the first page only (a refresh drops the rest). */
export function usePages<T>(path: string, query: Query, options: { param?: string; live?: boolean } = {}) {
  const { api } = useDashboard();
  const key = JSON.stringify(query);
  const [more, setMore] = useState<{ key: string; cursor: string }>();
  const cursor = more?.key === key ? more.cursor : undefined;
  const [rows, setRows] = useState<T[]>([]);
  const list = useLoad(
    async () => {
      const page = await api.request<Page<T>>('GET', path, {
        query: { ...query, [options.param ?? 'cursor']: cursor },
      });
      setRows((earlier) => (cursor ? [...earlier, ...page.data] : page.data));
      return page;
    },
    [key, cursor],
    { live: (options.live ?? true) && !cursor },
  );
  return {
    list,
    rows,
    cursor,
    more: (next: string) => setMore({ key, cursor: next }),
    first: () => setMore(undefined),
  };
}

/** Runs an action once at a time, keeping its error (and the fields it names) for the form, and what it did. */
export function useAction() {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>();
  const [notice, setNotice] = useState<string>();
  const run = useCallback(async <T,>(action: () => Promise<T>): Promise<T | undefined> => {
    setBusy(true);
    setError(undefined);
    try {
      const result = await action();
      // Every view that shows money or status reads it again after an action.
      refreshLiveViews();
      return result;
    } catch (caught) {
      setError(caught);
      return undefined;
    } finally {
      setBusy(false);
    }
  }, []);
  return { busy, error, errors: fieldErrors(error), setError, notice, setNotice, run };
}

export type Action = ReturnType<typeof useAction>;

/** What the action last did, and its error (`unlessOnAField`: see ErrorNote). */
export function ActionNotes(props: { action: Action; unlessOnAField?: boolean }) {
  return (
    <>
      {props.action.notice && <Notice>{props.action.notice}</Notice>}
      <ErrorNote error={props.action.error} unlessOnAField={props.unlessOnAField} />
    </>
  );
}

/** A button running one call through an action: `ask` (a confirm) first when given, then the call, then `done`. */
export function ActionButton<T>(props: {
  action: Action;
  call: () => Promise<T>;
  ask?: () => Promise<unknown>;
  done?: (answer: T) => void;
  class?: string;
  children: ComponentChildren;
}) {
  return (
    <button
      type="button"
      class={props.class ?? 'outline small'}
      disabled={props.action.busy}
      onClick={async () => {
        if (props.ask && !(await props.ask())) return;
        // Wrapped: a call that answers nothing (a 204) succeeded too.
        const succeeded = await props.action.run(async () => ({ answer: await props.call() }));
        if (succeeded) props.done?.(succeeded.answer);
      }}
    >
      {props.children}
    </button>
  );
}
