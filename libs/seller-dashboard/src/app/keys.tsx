import { useState } from 'preact/hooks';
import { useConfirm } from './confirm';
import { useDashboard } from './context';
import { dateTime } from './format';
import type { Account } from './types';
import { CopyButton, ErrorNote, Field, Notice, useAction } from './ui';

export function Keys(props: {
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

function overlapLabel(hours: number): string {
  if (hours % 24 === 0) return hours === 24 ? '1 day' : `${hours / 24} days`;
  return hours === 1 ? '1 hour' : `${hours} hours`;
}
