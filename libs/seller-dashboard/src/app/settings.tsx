import { useState } from 'preact/hooks';
import { fieldErrors, newIdempotencyKey } from './api';
import { useConfirm } from './confirm';
import { useDashboard } from './context';
import { WebhookEndpoints } from './endpoints';
import { checksummed, dateTime } from './format';
import { toChecksumAddress } from './siwe';
import type { Account, Delivery, Page } from './types';
import {
  Address,
  CopyButton,
  Empty,
  ErrorNote,
  Field,
  LoadState,
  Notice,
  SecretOnce,
  StatusBadge,
  useAction,
  useLoad,
} from './ui';
import { browserWallet, signWithAccountWallet, WalletError } from './wallet';

/** 172800 → "48 hours"; 90 → "2 minutes". */
function duration(seconds: number): string {
  if (seconds >= 2 * 86_400) return `${Math.round(seconds / 86_400)} days`;
  if (seconds >= 2 * 3600) return `${Math.round(seconds / 3600)} hours`;
  if (seconds >= 120) return `${Math.round(seconds / 60)} minutes`;
  return `${seconds} seconds`;
}

export function SettingsPage() {
  const { api } = useDashboard();
  const account = useLoad(() => api.request<Account>('GET', '/api/v1/account'), []);
  const [secret, setSecret] = useState<{ label: string; value: string }>();
  if (secret)
    return <SecretOnce label={secret.label} value={secret.value} onDone={() => setSecret(undefined)} />;
  return (
    <>
      <h1>Settings</h1>
      {!account.data ? (
        <LoadState load={account} what="your settings">
          {() => null}
        </LoadState>
      ) : (
        <>
          <PayoutAddress account={account.data} onSaved={account.set} />
          <PayoutSettings account={account.data} onSaved={account.set} onSecret={setSecret} />
          <Keys account={account.data} onChanged={account.reload} onSecret={setSecret} />
          <WebhookEndpoints onSecret={setSecret} />
          <Deliveries />
        </>
      )}
    </>
  );
}

/**
 * The payout address moves only with a fresh signature by the account wallet (a stolen session cannot redirect
 * payouts): the API issues the message, the wallet signs it, the API checks the signer. The change is announced
 * by webhook and paid to after the delay the API states.
 */
function PayoutAddress(props: { account: Account; onSaved: (account: Account) => void }) {
  const { api } = useDashboard();
  const a = props.account;
  const [address, setAddress] = useState(checksummed(a.pendingPayoutAddress?.address ?? a.payoutAddress));
  const [notice, setNotice] = useState<string>();
  const [walletProblem, setWalletProblem] = useState<string>();
  const action = useAction();
  const errors = fieldErrors(action.error);
  const confirm = useConfirm();
  const change = async () => {
    setNotice(undefined);
    setWalletProblem(undefined);
    const result = await action.run(async () => {
      // The API checks the address first (and names its rule); the seller then sees exactly what is signed.
      const challenge = await api.request<{ message: string; delaySeconds: number }>(
        'POST',
        '/api/v1/account/payout-address/challenge',
        { body: { payoutAddress: address.trim() } },
      );
      const checksummed = toChecksumAddress(address.trim());
      const effectiveAt = new Date(Date.now() + challenge.delaySeconds * 1000);
      const answer = await confirm.ask({
        title: 'Send your payouts to a new address?',
        facts: [
          ['New payout address', <Address key="n" value={checksummed} label="new payout address" />],
          ['Current address', <Address key="c" value={a.payoutAddress} label="current payout address" />],
          ['Takes effect', `${dateTime(effectiveAt.toISOString())} (in ${duration(challenge.delaySeconds)})`],
        ],
        effect: (
          <>
            Until then every payout still goes to your current address, and you can cancel the change. Your
            webhook is told at once. Check every character of the new address: USDC sent to a wrong address
            cannot be recovered. Next, your account wallet <code>{a.walletAddress}</code> signs the change.
          </>
        ),
        confirmLabel: 'Sign with wallet',
      });
      if (!answer) return undefined;
      let signature: string;
      try {
        signature = await signWithAccountWallet(browserWallet(), a.walletAddress, challenge.message);
      } catch (error) {
        if (error instanceof WalletError) {
          setWalletProblem(error.message);
          return undefined;
        }
        throw error;
      }
      return api.request<{ account: Account; effectiveAt: string }>(
        'POST',
        '/api/v1/account/payout-address',
        {
          body: { message: challenge.message, signature },
        },
      );
    });
    if (!result) return;
    props.onSaved(result.account);
    setNotice(
      result.account.pendingPayoutAddress
        ? `Payout address change signed: payouts go to ${toChecksumAddress(result.account.pendingPayoutAddress.address)} from ${dateTime(result.effectiveAt)}. Until then they go to ${toChecksumAddress(result.account.payoutAddress)}. Your webhook was told.`
        : `Payout address changed: payouts go to ${toChecksumAddress(result.account.payoutAddress)}.`,
    );
  };
  const cancel = async () => {
    setNotice(undefined);
    const cancelled = await action.run(() =>
      api.request<Account>('POST', '/api/v1/account/payout-address/cancel'),
    );
    if (!cancelled) return;
    props.onSaved(cancelled);
    setAddress(checksummed(cancelled.payoutAddress));
    setNotice('Pending payout address change cancelled.');
  };
  return (
    <section aria-labelledby="payout-address-title">
      <h2 id="payout-address-title">Where payouts go</h2>
      <p data-testid="payout-current">
        Payouts go to <Address value={a.payoutAddress} label="payout address" />.
      </p>
      {a.pendingPayoutAddress && (
        <p data-testid="payout-pending">
          Changing to <Address value={a.pendingPayoutAddress.address} label="pending payout address" /> on{' '}
          {dateTime(a.pendingPayoutAddress.effectiveAt)}; until then payouts go to the address above.{' '}
          <button type="button" class="outline small" disabled={action.busy} onClick={cancel}>
            Cancel change
          </button>
        </p>
      )}
      {notice && <Notice>{notice}</Notice>}
      {walletProblem && (
        <p role="alert" class="error-note">
          {walletProblem}
        </p>
      )}
      {action.error && !Object.keys(errors).length ? <ErrorNote error={action.error} /> : null}
      <form
        onSubmit={(event) => {
          event.preventDefault();
          void change();
        }}
      >
        <Field
          id="acct-payoutAddress"
          label="Payout address"
          hint="your account wallet signs the change; it is announced to your webhook and takes effect after a delay"
          error={errors.payoutAddress}
        >
          {(aria) => (
            <input
              {...aria}
              name="payoutAddress"
              value={address}
              onInput={(e) => setAddress((e.target as HTMLInputElement).value)}
            />
          )}
        </Field>
        <button type="submit" disabled={action.busy} aria-busy={action.busy}>
          Sign and change payout address
        </button>
      </form>
      {confirm.dialog}
    </section>
  );
}

function PayoutSettings(props: {
  account: Account;
  /** The account as saved: a secret shown once replaces the page, and the form comes back from this. */
  onSaved: (account: Account) => void;
  onSecret: (secret: { label: string; value: string }) => void;
}) {
  const { api } = useDashboard();
  const a = props.account;
  const [form, setForm] = useState({
    webhookUrl: a.webhookUrl ?? '',
    settlementFrequency: a.settlementFrequency,
    minimumSettlement: a.minimumSettlement,
  });
  const [saved, setSaved] = useState(false);
  const save = useAction();
  const errors = fieldErrors(save.error);
  const input = (key: 'webhookUrl' | 'minimumSettlement', label: string, hint: string) => (
    <Field id={`acct-${key}`} label={label} hint={hint} error={errors[key]}>
      {(aria) => (
        <input
          {...aria}
          name={key}
          value={form[key]}
          onInput={(e) => {
            setSaved(false);
            setForm({ ...form, [key]: (e.target as HTMLInputElement).value });
          }}
        />
      )}
    </Field>
  );
  return (
    <section aria-labelledby="payout-title">
      <h2 id="payout-title">Settlements and webhooks</h2>
      <form
        onSubmit={async (event) => {
          event.preventDefault();
          const result = await save.run(() =>
            api.request<{ account: Account; webhookSecret?: string }>('PATCH', '/api/v1/account', {
              body: {
                webhookUrl: form.webhookUrl.trim() === '' ? null : form.webhookUrl.trim(),
                settlementFrequency: form.settlementFrequency,
                minimumSettlement: form.minimumSettlement.trim(),
              },
            }),
          );
          if (!result) return;
          setSaved(true);
          props.onSaved(result.account);
          if (result.webhookSecret)
            props.onSecret({ label: 'webhook signing secret', value: result.webhookSecret });
        }}
      >
        {saved && <Notice>Settings saved.</Notice>}
        {save.error && !Object.keys(errors).length ? <ErrorNote error={save.error} /> : null}
        {input(
          'webhookUrl',
          'Webhook URL',
          'Paygate posts signed events here (payments, refunds, payout-address changes); empty removes it',
        )}
        <div class="grid">
          <Field
            id="acct-settlementFrequency"
            label="Settlement frequency"
            error={errors.settlementFrequency}
          >
            {(aria) => (
              <select
                {...(aria as object)}
                value={form.settlementFrequency}
                onChange={(e) =>
                  setForm({
                    ...form,
                    settlementFrequency: (e.target as HTMLSelectElement)
                      .value as Account['settlementFrequency'],
                  })
                }
              >
                <option value="DAILY">Daily</option>
                <option value="WEEKLY">Weekly</option>
                <option value="MONTHLY">Monthly</option>
              </select>
            )}
          </Field>
          {input(
            'minimumSettlement',
            'Minimum settlement (USDC)',
            'smaller balances wait for the next period',
          )}
        </div>
        <button type="submit" disabled={save.busy} aria-busy={save.busy}>
          Save settings
        </button>
      </form>
    </section>
  );
}

function Keys(props: {
  account: Account;
  onChanged: () => void;
  onSecret: (secret: { label: string; value: string }) => void;
}) {
  const { api } = useDashboard();
  const action = useAction();
  const [notice, setNotice] = useState<string>();
  const [revokeImmediately, setRevokeImmediately] = useState(false);
  const [overlapHours, setOverlapHours] = useState(24);
  const [newKeyName, setNewKeyName] = useState('');
  const [keyName, setKeyName] = useState(props.account.apiKey?.name ?? '');
  const a = props.account;
  const keyPrefix = a.publishableKey.startsWith('pk_live_') ? 'sk_live_' : 'sk_test_';
  const confirm = useConfirm();
  const rotate = async (what: 'api-key' | 'publishable-key' | 'webhook-secret') => {
    const warnings = {
      'api-key': revokeImmediately
        ? 'Rotate the secret API key and revoke the current one? The current sk_ key stops working at once on every server that uses it, and requests Paygate forwards to your API are signed with the new key only: deploy it where verifyPaygateRequest runs.'
        : `Rotate the secret API key? The current sk_ key keeps working for ${overlapLabel(overlapHours)} (until about ${dateTime(new Date(Date.now() + overlapHours * 3_600_000).toISOString())}), while Paygate signs requests to your API with both keys: deploy the new one before it ends.`,
      'publishable-key': 'Rotate the publishable key? Pages that embed the current pk_ key must be updated.',
      'webhook-secret':
        'Rotate the webhook signing secret? Your webhook handler must use the new secret. The secret of every webhook endpoint is derived from it and changes too: rotate each endpoint to see its new one.',
    };
    const titles = {
      'api-key': 'Rotate the secret API key?',
      'publishable-key': 'Rotate the publishable key?',
      'webhook-secret': 'Rotate the webhook signing secret?',
    };
    const answer = await confirm.ask({
      title: titles[what],
      facts: [],
      effect: warnings[what].replace(/^[^?]*\? /, ''),
      confirmLabel: 'Rotate',
    });
    if (!answer) return;
    const result = await action.run(() =>
      api.request<{ apiKey?: string; webhookSecret?: string; publishableKey?: string }>(
        'POST',
        `/api/v1/account/${what}/rotate`,
        what === 'api-key'
          ? {
              body: {
                ...(revokeImmediately ? { revokeImmediately: true } : { overlapHours }),
                ...(newKeyName.trim() ? { name: newKeyName.trim() } : {}),
              },
            }
          : undefined,
      ),
    );
    if (!result) return;
    props.onChanged(); // the key versions shown after the secret
    if (result.apiKey) props.onSecret({ label: 'new secret API key (sk_)', value: result.apiKey });
    else if (result.webhookSecret)
      props.onSecret({ label: 'new webhook signing secret', value: result.webhookSecret });
    else setNotice('New publishable key in place.');
  };
  return (
    <section aria-labelledby="keys-title">
      <h2 id="keys-title">Keys</h2>
      {confirm.dialog}
      {notice && <Notice>{notice}</Notice>}
      <ErrorNote error={action.error} />
      <dl class="facts">
        <dt>Secret API keys (sk_)</dt>
        <dd>
          <section class="table-wrap" aria-label="Secret API keys (scrolls sideways)">
            <table data-testid="api-keys">
              <caption class="visually-hidden">Secret API keys</caption>
              <thead>
                <tr>
                  <th scope="col">Name</th>
                  <th scope="col">Key</th>
                  <th scope="col">Created</th>
                  <th scope="col">Last used</th>
                  <th scope="col">Works</th>
                </tr>
              </thead>
              <tbody>
                {a.apiKey && (
                  <tr data-testid="api-key-current">
                    <td>{a.apiKey.name}</td>
                    <td>
                      <code>{a.apiKey.hint ? `${keyPrefix}…${a.apiKey.hint}` : `${keyPrefix}…`}</code>
                    </td>
                    <td>{a.apiKey.createdAt ? dateTime(a.apiKey.createdAt) : '—'}</td>
                    <td data-testid="api-key-last-used">
                      {a.apiKey.lastUsedAt ? dateTime(a.apiKey.lastUsedAt) : 'never'}
                    </td>
                    <td>current (version {a.apiKeyVersion})</td>
                  </tr>
                )}
                {a.previousApiKey && (
                  <tr data-testid="api-key-previous">
                    <td>{a.previousApiKey.name}</td>
                    <td>
                      <code>
                        {a.previousApiKey.hint ? `${keyPrefix}…${a.previousApiKey.hint}` : `${keyPrefix}…`}
                      </code>
                    </td>
                    <td>{a.previousApiKey.createdAt ? dateTime(a.previousApiKey.createdAt) : '—'}</td>
                    <td>{a.previousApiKey.lastUsedAt ? dateTime(a.previousApiKey.lastUsedAt) : 'never'}</td>
                    <td>
                      <strong>until {dateTime(a.previousApiKey.expiresAt)}</strong> (rotation overlap)
                    </td>
                  </tr>
                )}
              </tbody>
            </table>
          </section>
          <p class="key-note">
            A key is shown only when created. Lost it? Rotate it. Last use is to the minute.
            {!a.previousApiKey &&
              a.previousApiKeyExpiresAt &&
              ` The previous key works until ${dateTime(a.previousApiKeyExpiresAt)}.`}
          </p>
          {a.apiKey && (
            <form
              class="inline-form"
              onSubmit={async (event) => {
                event.preventDefault();
                const saved = await action.run(() =>
                  api.request<Account>('PATCH', '/api/v1/account/api-key', {
                    body: { name: keyName.trim() },
                  }),
                );
                if (saved) {
                  setNotice('Key name saved.');
                  props.onChanged();
                }
              }}
            >
              <Field id="key-name" label="Name of the current key" hint="Where it is used, 1-60 characters">
                {(aria) => (
                  <input
                    {...aria}
                    value={keyName}
                    maxLength={60}
                    onInput={(e) => setKeyName((e.target as HTMLInputElement).value)}
                  />
                )}
              </Field>
              <button type="submit" class="outline small" disabled={action.busy || !keyName.trim()}>
                Save key name
              </button>
            </form>
          )}
          <Field id="new-key-name" label="Name of the new key (optional)">
            {(aria) => (
              <input
                {...aria}
                value={newKeyName}
                maxLength={60}
                onInput={(e) => setNewKeyName((e.target as HTMLInputElement).value)}
              />
            )}
          </Field>
          <Field id="key-overlap" label="The current key keeps working for">
            {(aria) => (
              <select
                {...(aria as object)}
                value={String(overlapHours)}
                disabled={revokeImmediately}
                onChange={(e) => setOverlapHours(Number((e.target as HTMLSelectElement).value))}
              >
                {[1, 24, 72, 168].map((hours) => (
                  <option key={hours} value={String(hours)}>
                    {overlapLabel(hours)}
                  </option>
                ))}
              </select>
            )}
          </Field>
          <label class="inline">
            <input
              type="checkbox"
              checked={revokeImmediately}
              onChange={(e) => setRevokeImmediately((e.target as HTMLInputElement).checked)}
            />{' '}
            Revoke the current key at once (it leaked)
          </label>{' '}
          <button
            type="button"
            class="outline small"
            disabled={action.busy}
            onClick={() => rotate('api-key')}
          >
            Rotate secret key
          </button>
        </dd>
        <dt>Publishable key (pk_)</dt>
        <dd>
          <code data-testid="publishable-key" class="wrap">
            {a.publishableKey}
          </code>{' '}
          <CopyButton text={a.publishableKey} label="publishable key" />{' '}
          <button
            type="button"
            class="outline small"
            disabled={action.busy}
            onClick={() => rotate('publishable-key')}
          >
            Rotate publishable key
          </button>
        </dd>
        <dt>Webhook signing secret</dt>
        <dd>
          {a.webhookSecretVersion === 0
            ? 'created with your first webhook URL'
            : `version ${a.webhookSecretVersion}; shown only when created.`}{' '}
          {a.webhookSecretVersion > 0 && (
            <button
              type="button"
              class="outline small"
              disabled={action.busy}
              onClick={() => rotate('webhook-secret')}
            >
              Rotate webhook secret
            </button>
          )}
        </dd>
      </dl>
    </section>
  );
}

/** The exact body a delivery sent (read on demand: the list does not carry it). */
function Payload(props: { deliveryId: string }) {
  const { api } = useDashboard();
  const [payload, setPayload] = useState<string>();
  const action = useAction();
  if (payload)
    return (
      // biome-ignore lint/a11y/noNoninteractiveTabindex: a keyboard must reach it to scroll it (WCAG 2.1.1).
      <pre class="payload" data-testid="delivery-payload" tabIndex={0}>
        {payload}
      </pre>
    );
  return (
    <>
      <ErrorNote error={action.error} />
      <button
        type="button"
        class="outline small"
        disabled={action.busy}
        onClick={async () => {
          const detail = await action.run(() =>
            api.request<{ payload: unknown }>('GET', `/api/v1/webhooks/deliveries/${props.deliveryId}`),
          );
          if (detail) setPayload(JSON.stringify(detail.payload, null, 2));
        }}
      >
        Show payload
      </button>
    </>
  );
}

function overlapLabel(hours: number): string {
  if (hours % 24 === 0) return hours === 24 ? '1 day' : `${hours / 24} days`;
  return hours === 1 ? '1 hour' : `${hours} hours`;
}

function Deliveries() {
  const { api } = useDashboard();
  const [status, setStatus] = useState('');
  const [before, setBefore] = useState<string | undefined>();
  const [rows, setRows] = useState<Delivery[]>([]);
  const list = useLoad(
    async () => {
      const page = await api.request<Page<Delivery>>('GET', '/api/v1/webhooks/deliveries', {
        query: { limit: 20, status: status || undefined, before },
      });
      setRows((earlier) => (before ? [...earlier, ...page.data] : page.data));
      return page;
    },
    [status, before],
    { live: !before },
  );
  const action = useAction();
  const [notice, setNotice] = useState<string>();
  return (
    <section aria-labelledby="deliveries-title">
      <h2 id="deliveries-title">Webhook deliveries</h2>
      <div class="title-row">
        <Field id="deliveries-status" label="Show">
          {(aria) => (
            <select
              {...(aria as object)}
              value={status}
              onChange={(e) => {
                setBefore(undefined);
                setStatus((e.target as HTMLSelectElement).value);
              }}
            >
              <option value="">All</option>
              <option value="pending">Pending</option>
              <option value="delivered">Delivered</option>
              <option value="failed">Failed</option>
            </select>
          )}
        </Field>
        <button
          type="button"
          class="outline small"
          onClick={() => (before ? setBefore(undefined) : list.reload())}
        >
          Refresh
        </button>
      </div>
      {notice && <Notice>{notice}</Notice>}
      <ErrorNote error={action.error} />
      {list.data === undefined ? (
        <LoadState load={list} what="webhook deliveries">
          {() => null}
        </LoadState>
      ) : rows.length === 0 ? (
        <Empty>No webhook deliveries yet. Set a webhook URL above; each event is sent there, signed.</Empty>
      ) : (
        <ul class="cards">
          {rows.map((d) => (
            <li key={d.id} data-testid="delivery">
              <details>
                <summary>
                  <strong>{d.eventType}</strong> · <StatusBadge status={d.status} /> · {d.attemptCount}{' '}
                  attempt
                  {d.attemptCount === 1 ? '' : 's'} · {dateTime(d.createdAt)}
                  {d.redeliveryOf ? ' · redelivery' : ''}
                </summary>
                <p>
                  To <code class="wrap">{d.url}</code>
                  {d.endpointId ? ' (endpoint)' : ' (account webhook URL)'}
                  {d.lastError ? ` · last error: ${d.lastError}` : ''}
                  {d.nextAttemptAt && d.status === 'pending'
                    ? ` · next try ${dateTime(d.nextAttemptAt)}`
                    : ''}
                </p>
                {d.attempts.length > 0 && (
                  // biome-ignore lint/a11y/noNoninteractiveTabindex: a keyboard must reach it to scroll it (WCAG 2.1.1).
                  <section class="table-wrap" aria-label="Delivery attempts (scrolls sideways)" tabIndex={0}>
                    <table>
                      <caption class="visually-hidden">Attempts</caption>
                      <thead>
                        <tr>
                          <th scope="col">#</th>
                          <th scope="col">When</th>
                          <th scope="col">Answer</th>
                          <th scope="col">Body (start)</th>
                          <th scope="col">Time</th>
                          <th scope="col">Outcome</th>
                        </tr>
                      </thead>
                      <tbody>
                        {d.attempts.map((attempt) => (
                          <tr key={attempt.number}>
                            <td>{attempt.number}</td>
                            <td>{dateTime(attempt.attemptedAt)}</td>
                            <td>{attempt.statusCode ?? attempt.error ?? '—'}</td>
                            <td>
                              <code class="excerpt">{attempt.responseExcerpt ?? '—'}</code>
                            </td>
                            <td>{attempt.durationMs} ms</td>
                            <td>{attempt.outcome}</td>
                          </tr>
                        ))}
                      </tbody>
                    </table>
                  </section>
                )}
                <Payload deliveryId={d.id} />
              </details>
              <button
                type="button"
                class="outline small"
                disabled={action.busy}
                onClick={async () => {
                  const created = await action.run(() =>
                    api.request<Delivery>('POST', `/api/v1/webhooks/deliveries/${d.id}/redeliver`, {
                      idempotencyKey: newIdempotencyKey(),
                    }),
                  );
                  if (created) {
                    setNotice(`${d.eventType} sent again to your current webhook URL.`);
                    setBefore(undefined);
                    list.reload();
                  }
                }}
              >
                Redeliver
              </button>
            </li>
          ))}
        </ul>
      )}
      {list.data?.nextCursor && (
        <button type="button" class="outline" onClick={() => setBefore(list.data!.nextCursor!)}>
          Load more
        </button>
      )}
    </section>
  );
}
