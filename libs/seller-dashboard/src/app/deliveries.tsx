import { useState } from 'preact/hooks';
import { newIdempotencyKey } from './api';
import { useDashboard } from './context';
import { dateTime } from './format';
import type { Delivery, DeliveryAttempt, Page } from './types';
import { ActionButton, Empty, ErrorNote, LoadState, Notice, StatusBadge, useAction, useLoad } from './ui';
import { Field } from './ui-forms';
import { ScrollTable } from './ui-tables';

export function Deliveries() {
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
              <DeliveryDetails delivery={d} />
              <ActionButton
                action={action}
                call={() =>
                  api.request<Delivery>('POST', `/api/v1/webhooks/deliveries/${d.id}/redeliver`, {
                    idempotencyKey: newIdempotencyKey(),
                  })
                }
                done={() => {
                  setNotice(`${d.eventType} sent again to your current webhook URL.`);
                  setBefore(undefined);
                  list.reload();
                }}
              >
                Redeliver
              </ActionButton>
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
      <ActionButton
        action={action}
        call={() =>
          api.request<{ payload: unknown }>('GET', `/api/v1/webhooks/deliveries/${props.deliveryId}`)
        }
        done={(detail) => setPayload(JSON.stringify(detail.payload, null, 2))}
      >
        Show payload
      </ActionButton>
    </>
  );
}

/** What a delivery sent where, and each attempt's answer; the payload on demand. */
function DeliveryDetails(props: { delivery: Delivery }) {
  const d = props.delivery;
  return (
    <details>
      <summary>
        <strong>{d.eventType}</strong> · <StatusBadge status={d.status} /> · {d.attemptCount} attempt
        {d.attemptCount === 1 ? '' : 's'} · {dateTime(d.createdAt)}
        {d.redeliveryOf ? ' · redelivery' : ''}
      </summary>
      <p>
        To <code class="wrap">{d.url}</code>
        {d.endpointId ? ' (endpoint)' : ' (account webhook URL)'}
        {d.lastError ? ` · last error: ${d.lastError}` : ''}
        {d.nextAttemptAt && d.status === 'pending' ? ` · next try ${dateTime(d.nextAttemptAt)}` : ''}
      </p>
      {d.attempts.length > 0 && <AttemptsTable attempts={d.attempts} />}
      <Payload deliveryId={d.id} />
    </details>
  );
}

function AttemptsTable(props: { attempts: DeliveryAttempt[] }) {
  return (
    <ScrollTable
      label="Delivery attempts"
      caption="Attempts"
      columns={['#', 'When', 'Answer', 'Body (start)', 'Time', 'Outcome']}
      focusable
    >
      {props.attempts.map((attempt) => (
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
    </ScrollTable>
  );
}
