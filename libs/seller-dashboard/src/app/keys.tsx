import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import { useConfirm } from './confirm';
import { useDashboard } from './context';
import { dateTime } from './format';
import type { Account, ApiKeyInfo } from './types';
import { CopyButton, ErrorNote, Notice, useAction } from './ui';
import { SelectField, TextField } from './ui-forms';
import { ScrollTable } from './ui-tables';

type Rotatable = 'api-key' | 'publishable-key' | 'webhook-secret';

/** How the secret key is rotated: its successor's name, and how long the current one keeps working. */
interface RotationOptions {
  revokeImmediately: boolean;
  overlapHours: number;
  newKeyName: string;
}

export function Keys(props: {
  account: Account;
  onChanged: () => void;
  onSecret: (secret: { label: string; value: string }) => void;
}) {
  const a = props.account;
  const keys = useKeyRotation(props.onChanged, props.onSecret);
  const { action } = keys;
  const rotateButton = (what: Rotatable, label: string) => (
    <button type="button" class="outline small" disabled={action.busy} onClick={() => keys.rotate(what)}>
      {label}
    </button>
  );
  return (
    <section aria-labelledby="keys-title">
      <h2 id="keys-title">Keys</h2>
      {keys.confirm.dialog}
      {keys.notice && <Notice>{keys.notice}</Notice>}
      <ErrorNote error={action.error} />
      <dl class="facts">
        <dt>Secret API keys (sk_)</dt>
        <dd>
          <ApiKeysTable account={a} />
          {a.apiKey && (
            <KeyNameForm
              account={a}
              action={action}
              onSaved={() => {
                keys.setNotice('Key name saved.');
                props.onChanged();
              }}
            />
          )}
          <RotationFields options={keys.rotation} onChange={keys.setRotation} />{' '}
          {rotateButton('api-key', 'Rotate secret key')}
        </dd>
        <dt>Publishable key (pk_)</dt>
        <dd>
          <code data-testid="publishable-key" class="wrap">
            {a.publishableKey}
          </code>{' '}
          <CopyButton text={a.publishableKey} label="publishable key" />{' '}
          {rotateButton('publishable-key', 'Rotate publishable key')}
        </dd>
        <dt>Webhook signing secret</dt>
        <dd>
          {a.webhookSecretVersion === 0
            ? 'created with your first webhook URL'
            : `version ${a.webhookSecretVersion}; shown only when created.`}{' '}
          {a.webhookSecretVersion > 0 && rotateButton('webhook-secret', 'Rotate webhook secret')}
        </dd>
      </dl>
    </section>
  );
}

/** Rotates a key or secret after its confirmation (the secret key with the rotation options chosen). */
function useKeyRotation(onChanged: () => void, onSecret: (secret: { label: string; value: string }) => void) {
  const { api } = useDashboard();
  const action = useAction();
  const confirm = useConfirm();
  const [notice, setNotice] = useState<string>();
  const [rotation, setRotation] = useState<RotationOptions>({
    revokeImmediately: false,
    overlapHours: 24,
    newKeyName: '',
  });
  const rotate = async (what: Rotatable) => {
    const answer = await confirm.ask({
      ...rotationPrompt(what, rotation),
      facts: [],
      confirmLabel: 'Rotate',
    });
    if (!answer) return;
    const { revokeImmediately, overlapHours, newKeyName } = rotation;
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
    onChanged(); // the key versions shown after the secret
    if (result.apiKey) onSecret({ label: 'new secret API key (sk_)', value: result.apiKey });
    else if (result.webhookSecret)
      onSecret({ label: 'new webhook signing secret', value: result.webhookSecret });
    else setNotice('New publishable key in place.');
  };
  return { action, confirm, notice, setNotice, rotation, setRotation, rotate };
}

/** What the confirmation asks before a rotation, and what happens to the current key or secret. */
function rotationPrompt(what: Rotatable, options: RotationOptions): { title: string; effect: string } {
  const { revokeImmediately, overlapHours } = options;
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
  return { title: titles[what], effect: warnings[what].replace(/^[^?]*\? /, '') };
}

/** The current secret key and, during a rotation's overlap, the previous one: never the key itself. */
function ApiKeysTable(props: { account: Account }) {
  const a = props.account;
  const keyPrefix = a.publishableKey.startsWith('pk_live_') ? 'sk_live_' : 'sk_test_';
  return (
    <>
      <ScrollTable
        label="Secret API keys"
        columns={['Name', 'Key', 'Created', 'Last used', 'Works']}
        testId="api-keys"
      >
        {a.apiKey && (
          <ApiKeyRow
            testId="api-key-current"
            lastUsedTestId="api-key-last-used"
            info={a.apiKey}
            prefix={keyPrefix}
          >
            current (version {a.apiKeyVersion})
          </ApiKeyRow>
        )}
        {a.previousApiKey && (
          <ApiKeyRow testId="api-key-previous" info={a.previousApiKey} prefix={keyPrefix}>
            <strong>until {dateTime(a.previousApiKey.expiresAt)}</strong> (rotation overlap)
          </ApiKeyRow>
        )}
      </ScrollTable>
      <p class="key-note">
        A key is shown only when created. Lost it? Rotate it. Last use is to the minute.
        {!a.previousApiKey &&
          a.previousApiKeyExpiresAt &&
          ` The previous key works until ${dateTime(a.previousApiKeyExpiresAt)}.`}
      </p>
    </>
  );
}

function ApiKeyRow(props: {
  testId: string;
  lastUsedTestId?: string;
  info: ApiKeyInfo;
  prefix: string;
  /** Until when the key works. */
  children: ComponentChildren;
}) {
  const { info, prefix } = props;
  return (
    <tr data-testid={props.testId}>
      <td>{info.name}</td>
      <td>
        <code>{info.hint ? `${prefix}…${info.hint}` : `${prefix}…`}</code>
      </td>
      <td>{info.createdAt ? dateTime(info.createdAt) : '—'}</td>
      <td data-testid={props.lastUsedTestId}>{info.lastUsedAt ? dateTime(info.lastUsedAt) : 'never'}</td>
      <td>{props.children}</td>
    </tr>
  );
}

/** Names the current key (where it is used); the name is all that changes. */
function KeyNameForm(props: { account: Account; action: ReturnType<typeof useAction>; onSaved: () => void }) {
  const { api } = useDashboard();
  const [keyName, setKeyName] = useState(props.account.apiKey?.name ?? '');
  const { action } = props;
  return (
    <form
      class="inline-form"
      onSubmit={async (event) => {
        event.preventDefault();
        const saved = await action.run(() =>
          api.request<Account>('PATCH', '/api/v1/account/api-key', {
            body: { name: keyName.trim() },
          }),
        );
        if (saved) props.onSaved();
      }}
    >
      <TextField
        id="key-name"
        label="Name of the current key"
        hint="Where it is used, 1-60 characters"
        value={keyName}
        onValue={setKeyName}
        input={{ maxLength: 60 }}
      />
      <button type="submit" class="outline small" disabled={action.busy || !keyName.trim()}>
        Save key name
      </button>
    </form>
  );
}

function RotationFields(props: { options: RotationOptions; onChange: (options: RotationOptions) => void }) {
  const { options } = props;
  const change = (patch: Partial<RotationOptions>) => props.onChange({ ...options, ...patch });
  return (
    <>
      <TextField
        id="new-key-name"
        label="Name of the new key (optional)"
        value={options.newKeyName}
        onValue={(newKeyName) => change({ newKeyName })}
        input={{ maxLength: 60 }}
      />
      <SelectField
        id="key-overlap"
        label="The current key keeps working for"
        value={String(options.overlapHours)}
        onValue={(hours) => change({ overlapHours: Number(hours) })}
        select={{ disabled: options.revokeImmediately }}
      >
        {[1, 24, 72, 168].map((hours) => (
          <option key={hours} value={String(hours)}>
            {overlapLabel(hours)}
          </option>
        ))}
      </SelectField>
      <label class="inline">
        <input
          type="checkbox"
          checked={options.revokeImmediately}
          onChange={(e) => change({ revokeImmediately: (e.target as HTMLInputElement).checked })}
        />{' '}
        Revoke the current key at once (it leaked)
      </label>
    </>
  );
}

function overlapLabel(hours: number): string {
  if (hours % 24 === 0) return hours === 24 ? '1 day' : `${hours / 24} days`;
  return hours === 1 ? '1 hour' : `${hours} hours`;
}
