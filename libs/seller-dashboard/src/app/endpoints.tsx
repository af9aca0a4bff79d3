import { useState } from 'preact/hooks';
import { ApiError, fieldErrors } from './api';
import { useConfirm } from './confirm';
import { useDashboard } from './context';
import { type Delivery, WEBHOOK_EVENT_TYPES, type WebhookEndpoint } from './types';
import { ActionButton, Empty, ErrorNote, LoadState, Notice, StatusBadge, useAction, useLoad } from './ui';
import { TextField } from './ui-forms';

const ALL = '*';

/**
 * Webhook endpoints beside the account's webhook URL: each with the events it wants and its own signing secret
 * (shown once, when created or rotated), a test event on demand, turned off and on, deleted.
 */
export function WebhookEndpoints(props: { onSecret: (secret: { label: string; value: string }) => void }) {
  const { api } = useDashboard();
  const list = useLoad(
    () => api.request<{ data: WebhookEndpoint[] }>('GET', '/api/v1/webhooks/endpoints'),
    [],
    { live: true },
  );
  const action = useAction();
  const confirm = useConfirm();
  const [notice, setNotice] = useState<string>();
  const [url, setUrl] = useState('');
  const [description, setDescription] = useState('');
  const [events, setEvents] = useState<string[]>([ALL]);
  const errors = fieldErrors(action.error);
  const toggle = (event: string, on: boolean) =>
    setEvents((current) => {
      if (event === ALL) return on ? [ALL] : [];
      const specific = current.filter((e) => e !== ALL && e !== event);
      return on ? [...specific, event] : specific;
    });

  const create = async (event: Event) => {
    event.preventDefault();
    const created = await action.run(() =>
      api.request<{ endpoint: WebhookEndpoint; secret: string }>('POST', '/api/v1/webhooks/endpoints', {
        body: { url: url.trim(), events, ...(description.trim() ? { description: description.trim() } : {}) },
      }),
    );
    if (!created) return;
    setUrl('');
    setDescription('');
    setEvents([ALL]);
    props.onSecret({ label: `signing secret of ${created.endpoint.url}`, value: created.secret });
  };

  return (
    <section aria-labelledby="endpoints-title">
      <h2 id="endpoints-title">Webhook endpoints</h2>
      <p>
        More URLs beside the webhook URL above, each with the events it wants and its own signing secret
        (verify it like the account's). Sent, signed and retried the same way.
      </p>
      {confirm.dialog}
      {notice && <Notice>{notice}</Notice>}
      <ErrorNote error={action.error} />
      {action.error instanceof ApiError && action.error.code === 'webhook_secret_missing' && (
        <p>
          Endpoint secrets are derived from your account's webhook signing secret, which does not exist yet.{' '}
          <ActionButton
            action={action}
            call={() =>
              api.request<{ webhookSecret: string }>('POST', '/api/v1/account/webhook-secret/rotate')
            }
            done={(created) => {
              setNotice('Account signing secret created: add the endpoint again.');
              props.onSecret({
                label:
                  'account webhook signing secret (for the webhook URL; endpoint secrets derive from it)',
                value: created.webhookSecret,
              });
            }}
          >
            Create it
          </ActionButton>
        </p>
      )}
      {list.data === undefined ? (
        <LoadState load={list} what="webhook endpoints">
          {() => null}
        </LoadState>
      ) : list.data.data.length === 0 ? (
        <Empty>No endpoints yet: add one below.</Empty>
      ) : (
        <ul class="cards">
          {list.data.data.map((endpoint) => (
            <li key={endpoint.id} data-testid="endpoint">
              <p>
                <code class="wrap">{endpoint.url}</code>{' '}
                <StatusBadge status={endpoint.enabled ? 'enabled' : 'disabled'} />
                {endpoint.description ? ` · ${endpoint.description}` : ''}
              </p>
              <p>
                Events: {endpoint.events.includes(ALL) ? 'all' : endpoint.events.join(', ')} · secret version{' '}
                {endpoint.secretVersion}
              </p>
              <div class="actions">
                <ActionButton
                  action={action}
                  call={() => api.request<Delivery>('POST', `/api/v1/webhooks/endpoints/${endpoint.id}/test`)}
                  done={() => setNotice(`Test event sent to ${endpoint.url}: see its delivery below.`)}
                >
                  Send test event
                </ActionButton>
                <ActionButton
                  action={action}
                  call={() =>
                    api.request<WebhookEndpoint>('PATCH', `/api/v1/webhooks/endpoints/${endpoint.id}`, {
                      body: { enabled: !endpoint.enabled },
                    })
                  }
                  done={list.reload}
                >
                  {endpoint.enabled ? 'Turn off' : 'Turn on'}
                </ActionButton>
                <ActionButton
                  action={action}
                  ask={() =>
                    confirm.ask({
                      title: 'Rotate this endpoint’s signing secret?',
                      facts: [],
                      effect: `Webhooks to ${endpoint.url} are signed with the new secret at once: your handler there must use it. Other endpoints keep theirs.`,
                      confirmLabel: 'Rotate',
                    })
                  }
                  call={() =>
                    api.request<{ endpoint: WebhookEndpoint; secret: string }>(
                      'POST',
                      `/api/v1/webhooks/endpoints/${endpoint.id}/rotate-secret`,
                    )
                  }
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
                    confirm.ask({
                      title: 'Delete this endpoint?',
                      facts: [],
                      effect: `Nothing more is sent to ${endpoint.url}; deliveries still waiting for it are given up. Its log stays.`,
                      confirmLabel: 'Delete endpoint',
                    })
                  }
                  call={() => api.request('DELETE', `/api/v1/webhooks/endpoints/${endpoint.id}`)}
                  done={() => {
                    setNotice(`Endpoint ${endpoint.url} deleted.`);
                    list.reload();
                  }}
                >
                  Delete
                </ActionButton>
              </div>
            </li>
          ))}
        </ul>
      )}
      <form onSubmit={create} noValidate>
        <h3>Add an endpoint</h3>
        <TextField
          id="endpoint-url"
          label="Endpoint URL"
          required
          error={errors.url}
          value={url}
          onValue={setUrl}
          input={{ type: 'url', placeholder: 'https://api.example.com/paygate/webhooks' }}
        />
        <TextField
          id="endpoint-description"
          label="Description (optional)"
          error={errors.description}
          value={description}
          onValue={setDescription}
          input={{ maxLength: 200 }}
        />
        <fieldset aria-describedby={errors.events ? 'endpoint-events-error' : undefined}>
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
          {(errors.events || events.length === 0) && (
            <p id="endpoint-events-error" class="error-note">
              Choose at least one event.
            </p>
          )}
        </fieldset>
        <button type="submit" disabled={action.busy || events.length === 0}>
          Add endpoint
        </button>
      </form>
    </section>
  );
}
