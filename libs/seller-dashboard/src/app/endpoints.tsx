import { WEBHOOK_EVENT_TYPES } from '@paygate/contracts/webhook-events';
import { useState } from 'preact/hooks';
import { ApiError } from './api';
import { useConfirm } from './confirm';
import { useDashboard } from './context';
import type { Page, WebhookEndpoint } from './types';
import {
  type Action,
  ActionButton,
  ActionNotes,
  Empty,
  LoadState,
  StatusBadge,
  useAction,
  useGet,
} from './ui';
import { fieldsOf, TextField, useForm } from './ui-forms';

const ALL = '*';

type OnSecret = (secret: { label: string; value: string }) => void;

export function WebhookEndpoints(props: { onSecret: OnSecret }) {
  const list = useGet<Page<WebhookEndpoint>>('/api/v1/webhooks/endpoints', { live: true });
  const action = useAction();
  const confirm = useConfirm();
  return (
    <section aria-labelledby="endpoints-title">
      <h2 id="endpoints-title">Webhook endpoints</h2>
      <p>
        More URLs beside the webhook URL above, each with the events it wants and its own signing secret
        (verify it like the account's). Sent, signed and retried the same way.
      </p>
      {confirm.dialog}
      <ActionNotes action={action} />
      {action.error instanceof ApiError && action.error.code === 'webhook_secret_missing' && (
        <SecretMissing action={action} onSecret={props.onSecret} />
      )}
      {list.data === undefined ? (
        <LoadState load={list} what="webhook endpoints" />
      ) : list.data.data.length === 0 ? (
        <Empty>No endpoints yet: add one below.</Empty>
      ) : (
        <ul class="cards">
          {list.data.data.map((endpoint) => (
            <EndpointItem
              key={endpoint.id}
              endpoint={endpoint}
              action={action}
              ask={confirm.ask}
              onChanged={list.reload}
              onSecret={props.onSecret}
            />
          ))}
        </ul>
      )}
      <AddEndpointForm action={action} onSecret={props.onSecret} />
    </section>
  );
}

/** Endpoint secrets derive from the account's webhook signing secret: created here when it does not exist yet. */
function SecretMissing(props: { action: Action; onSecret: OnSecret }) {
  const { api } = useDashboard();
  return (
    <p>
      Endpoint secrets are derived from your account's webhook signing secret, which does not exist yet.{' '}
      <ActionButton
        action={props.action}
        call={() => api.request<{ webhookSecret: string }>('POST', '/api/v1/account/webhook-secret/rotate')}
        done={(created) => {
          props.action.setNotice('Account signing secret created: add the endpoint again.');
          props.onSecret({
            label: 'account webhook signing secret (for the webhook URL; endpoint secrets derive from it)',
            value: created.webhookSecret,
          });
        }}
      >
        Create it
      </ActionButton>
    </p>
  );
}

interface EndpointProps {
  endpoint: WebhookEndpoint;
  action: Action;
  ask: ReturnType<typeof useConfirm>['ask'];
  /** The list reads again (an endpoint turned off or on, or deleted). */
  onChanged: () => void;
  onSecret: OnSecret;
}

function EndpointItem(props: EndpointProps) {
  const { endpoint } = props;
  return (
    <li data-testid="endpoint">
      <p>
        <code class="wrap">{endpoint.url}</code>{' '}
        <StatusBadge status={endpoint.enabled ? 'enabled' : 'disabled'} />
        {endpoint.description ? ` · ${endpoint.description}` : ''}
      </p>
      <p>
        Events: {endpoint.events.includes(ALL) ? 'all' : endpoint.events.join(', ')} · secret version{' '}
        {endpoint.secretVersion}
      </p>
      <EndpointActions {...props} />
    </li>
  );
}

/** Send a test event, turn off or on, rotate the secret, delete (the last two after a confirmation). */
function EndpointActions(props: EndpointProps) {
  const { api } = useDashboard();
  const { endpoint, action, ask } = props;
  const path = `/api/v1/webhooks/endpoints/${endpoint.id}`;
  return (
    <div class="actions">
      <ActionButton
        action={action}
        call={() => api.request('POST', `${path}/test`)}
        done={() => props.action.setNotice(`Test event sent to ${endpoint.url}: see its delivery below.`)}
      >
        Send test event
      </ActionButton>
      <ActionButton
        action={action}
        call={() => api.request('PATCH', path, { body: { enabled: !endpoint.enabled } })}
        done={props.onChanged}
      >
        {endpoint.enabled ? 'Turn off' : 'Turn on'}
      </ActionButton>
      <ActionButton
        action={action}
        ask={() =>
          ask({
            title: 'Rotate this endpoint’s signing secret?',
            effect: `Webhooks to ${endpoint.url} are signed with the new secret at once: your handler there must use it. Other endpoints keep theirs.`,
            confirmLabel: 'Rotate',
          })
        }
        call={() => api.request<{ secret: string }>('POST', `${path}/rotate-secret`)}
        done={(rotated) =>
          props.onSecret({ label: `new signing secret of ${endpoint.url}`, value: rotated.secret })
        }
      >
        Rotate secret
      </ActionButton>
      <ActionButton
        action={action}
        class="outline secondary small"
        ask={() =>
          ask({
            title: 'Delete this endpoint?',
            effect: `Nothing more is sent to ${endpoint.url}; deliveries still waiting for it are given up. Its log stays.`,
            confirmLabel: 'Delete endpoint',
          })
        }
        call={() => api.request('DELETE', path)}
        done={() => {
          props.action.setNotice(`Endpoint ${endpoint.url} deleted.`);
          props.onChanged();
        }}
      >
        Delete
      </ActionButton>
    </div>
  );
}

/** A new endpoint; its signing secret is shown once when it is created. */
function AddEndpointForm(props: { action: Action; onSecret: OnSecret }) {
  const { api } = useDashboard();
  const { action } = props;
  const [values, set] = useForm({ url: '', description: '' });
  const field = fieldsOf('endpoint', values, set, action.errors);
  const [events, setEvents] = useState<string[]>([ALL]);
  const create = async (event: Event) => {
    event.preventDefault();
    const description = values.description.trim();
    const created = await action.run(() =>
      api.request<{ endpoint: WebhookEndpoint; secret: string }>('POST', '/api/v1/webhooks/endpoints', {
        body: { url: values.url.trim(), events, ...(description ? { description } : {}) },
      }),
    );
    if (!created) return;
    set({ url: '', description: '' });
    setEvents([ALL]);
    props.onSecret({ label: `signing secret of ${created.endpoint.url}`, value: created.secret });
  };
  return (
    <form onSubmit={create} noValidate>
      <h3>Add an endpoint</h3>
      <TextField
        {...field('url')}
        label="Endpoint URL"
        required
        input={{ type: 'url', placeholder: 'https://api.example.com/paygate/webhooks' }}
      />
      <TextField {...field('description')} label="Description (optional)" input={{ maxLength: 200 }} />
      <EventsFieldset events={events} setEvents={setEvents} error={action.errors.events} />
      <button type="submit" disabled={action.busy || events.length === 0}>
        Add endpoint
      </button>
    </form>
  );
}

/** The events an endpoint wants: all of them, or the ones ticked. */
function EventsFieldset(props: {
  events: string[];
  setEvents: (update: (current: string[]) => string[]) => void;
  error?: string;
}) {
  const { events } = props;
  const toggle = (event: string, on: boolean) =>
    props.setEvents((current) => {
      if (event === ALL) return on ? [ALL] : [];
      const specific = current.filter((e) => e !== ALL && e !== event);
      return on ? [...specific, event] : specific;
    });
  return (
    <fieldset aria-describedby={props.error ? 'endpoint-events-error' : undefined}>
      <legend>Events to send</legend>
      {[ALL, ...WEBHOOK_EVENT_TYPES].map((event) => (
        <label key={event} class="inline">
          <input
            type="checkbox"
            checked={events.includes(event)}
            onChange={(e) => toggle(event, (e.target as HTMLInputElement).checked)}
          />{' '}
          {event === ALL ? 'All events' : event}
        </label>
      ))}
      {(props.error || events.length === 0) && (
        <p id="endpoint-events-error" class="error-note">
          Choose at least one event.
        </p>
      )}
    </fieldset>
  );
}
