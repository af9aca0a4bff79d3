import { useState } from 'preact/hooks';
import { useConfirm } from './confirm';
import { useDashboard } from './context';
import { dateTime } from './format';
import type { Account } from './types';
import { type Action, ActionNotes, CopyButton, useAction } from './ui';
import { SelectField, TextField } from './ui-forms';
import { ScrollTable } from './ui-tables';

type Rotatable = 'api-key' | 'publishable-key' | 'webhook-secret';
type OnSecret = (secret: { label: string; value: string }) => void;

/** How the secret key is rotated: its successor's name, and how long the current one keeps working. */
interface RotationOptions {
  revokeImmediately: boolean;
  overlapHours: number;
  newKeyName: string;
}

export function Keys(props: { account: Account; onChanged: () => void; onSecret: OnSecret }) {
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
      <ActionNotes action={action} />
      <dl class="facts">
        <dt>Secret API keys (sk_)</dt>
        <dd>
          <ApiKeysTable account={a} />
          <KeyNameForm
            account={a}
            action={action}
            onSaved={() => {
              action.setNotice('Key name saved.');
              props.onChanged();
            }}
          />
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
function useKeyRotation(onChanged: () => void, onSecret: OnSecret) {
  const { api } = useDashboard();
  const action = useAction();
  const confirm = useConfirm();
  const [rotation, setRotation] = useState<RotationOptions>({
    revokeImmediately: false,
    overlapHours: 24,
    newKeyName: '',
  });
  const rotate = async (what: Rotatable) => {
    const [title, effect] = rotationPrompt(what, rotation);
    if (!(await confirm.ask({ title, effect, confirmLabel: 'Rotate' }))) return;
    const { revokeImmediately, overlapHours, newKeyName } = rotation;
    const body = {
      ...(revokeImmediately ? { revokeImmediately: true } : { overlapHours }),
      ...(newKeyName.trim() ? { name: newKeyName.trim() } : {}),
    };
    const result = await action.run(() =>
      api.request<{ apiKey?: string; webhookSecret?: string }>(
        'POST',
        `/api/v1/account/${what}/rotate`,
        what === 'api-key' ? { body } : undefined,
      ),
    );
    if (!result) return;
    onChanged(); // the key versions shown after the secret
    if (result.apiKey) onSecret({ label: 'new secret API key (sk_)', value: result.apiKey });
    else if (result.webhookSecret)
      onSecret({ label: 'new webhook signing secret', value: result.webhookSecret });
    else action.setNotice('New publishable key in place.');
  };
  return { action, confirm, rotation, setRotation, rotate };
}

/** The confirmation's title, and what happens to the current key or secret. */
function rotationPrompt(
  what: Rotatable,
  { revokeImmediately, overlapHours }: RotationOptions,
): [string, string] {
  if (what === 'publishable-key')
    return ['Rotate the publishable key?', 'Pages that embed the current pk_ key must be updated.'];
  if (what === 'webhook-secret')
    return [
      'Rotate the webhook signing secret?',
      'Your webhook handler must use the new secret. The secret of every webhook endpoint is derived from it and changes too: rotate each endpoint to see its new one.',
    ];
  const until = dateTime(new Date(Date.now() + overlapHours * 3_600_000).toISOString());
  return [
    'Rotate the secret API key?',
    revokeImmediately
      ? 'The current sk_ key stops working at once on every server that uses it, and requests Paygate forwards to your API are signed with the new key only: deploy it where verifyPaygateRequest runs.'
      : `The current sk_ key keeps working for ${overlapLabel(overlapHours)} (until about ${until}), while Paygate signs requests to your API with both keys: deploy the new one before it ends.`,
  ];
}

/** The current secret key and, during a rotation's overlap, the previous one: never the key itself. */
function ApiKeysTable(props: { account: Account }) {
  const a = props.account;
  const prefix = a.publishableKey.startsWith('pk_live_') ? 'sk_live_' : 'sk_test_';
  const rows = [
    { id: 'api-key-current', info: a.apiKey, works: <>current (version {a.apiKeyVersion})</> },
    a.previousApiKey && {
      id: 'api-key-previous',
      info: a.previousApiKey,
      works: (
        <>
          <strong>until {dateTime(a.previousApiKey.expiresAt)}</strong> (rotation overlap)
        </>
      ),
    },
  ];
  return (
    <>
      <ScrollTable
        label="Secret API keys"
        columns={['Name', 'Key', 'Created', 'Last used', 'Works']}
        testId="api-keys"
      >
        {rows.map(
          (row) =>
            row && (
              <tr key={row.id} data-testid={row.id}>
                <td>{row.info.name}</td>
                <td>
                  <code>{`${prefix}…${row.info.hint ?? ''}`}</code>
                </td>
                <td>{dateTime(row.info.createdAt)}</td>
                <td data-testid={row.id === 'api-key-current' ? 'api-key-last-used' : undefined}>
                  {row.info.lastUsedAt ? dateTime(row.info.lastUsedAt) : 'never'}
                </td>
                <td>{row.works}</td>
              </tr>
            ),
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

/** Names the current key (where it is used); the name is all that changes. */
function KeyNameForm(props: { account: Account; action: Action; onSaved: () => void }) {
  const { api } = useDashboard();
  const [keyName, setKeyName] = useState(props.account.apiKey.name);
  const { action } = props;
  return (
    <form
      class="inline-form"
      onSubmit={async (event) => {
        event.preventDefault();
        const body = { name: keyName.trim() };
        if (await action.run(() => api.request('PATCH', '/api/v1/account/api-key', { body })))
          props.onSaved();
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
        options={[1, 24, 72, 168].map((hours): [string, string] => [String(hours), overlapLabel(hours)])}
      />
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
