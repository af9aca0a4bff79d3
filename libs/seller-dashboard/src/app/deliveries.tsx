import { useState } from 'preact/hooks';
import { newIdempotencyKey } from './api';
import { useDashboard } from './context';
import { dateTime } from './format';
import type { Delivery, DeliveryAttempt } from './types';
import {
  type Action,
  ActionButton,
  ActionNotes,
  Empty,
  LoadMore,
  LoadState,
  StatusBadge,
  useAction,
  usePages,
} from './ui';
import { SelectField } from './ui-forms';
import { ScrollTable } from './ui-tables';

export function Deliveries() {
  const [status, setStatus] = useState('');
  const pages = usePages<Delivery>(
    '/api/v1/webhooks/deliveries',
    { limit: 20, status: status || undefined },
    { param: 'before' },
  );
  const { list, rows } = pages;
  const action = useAction();
  return (
    <section aria-labelledby="deliveries-title">
      <h2 id="deliveries-title">Webhook deliveries</h2>
      <div class="title-row">
        <SelectField id="deliveries-status" label="Show" value={status} onValue={setStatus}>
          <option value="">All</option>
          <option value="pending">Pending</option>
          <option value="delivered">Delivered</option>
          <option value="failed">Failed</option>
        </SelectField>
        <button
          type="button"
          class="outline small"
          onClick={() => (pages.cursor ? pages.first() : list.reload())}
        >
          Refresh
        </button>
      </div>
      <ActionNotes action={action} />
      {list.data === undefined ? (
        <LoadState load={list} what="webhook deliveries" />
      ) : rows.length === 0 ? (
        <Empty>No webhook deliveries yet. Set a webhook URL above; each event is sent there, signed.</Empty>
      ) : (
        <ul class="cards">
          {rows.map((d) => (
            <DeliveryItem
              key={d.id}
              delivery={d}
              action={action}
              onRedelivered={() => {
                action.setNotice(`${d.eventType} sent again to your current webhook URL.`);
                pages.first();
                list.reload();
              }}
            />
          ))}
        </ul>
      )}
      <LoadMore load={list} onMore={pages.more} />
    </section>
  );
}

/** What a delivery sent where, each attempt's answer, the payload on demand, and its button to send it again. */
function DeliveryItem(props: { delivery: Delivery; action: Action; onRedelivered: () => void }) {
  const { api } = useDashboard();
  const d = props.delivery;
  return (
    <li data-testid="delivery">
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
      <ActionButton
        action={props.action}
        call={() =>
          api.request<Delivery>('POST', `/api/v1/webhooks/deliveries/${d.id}/redeliver`, {
            idempotencyKey: newIdempotencyKey(),
          })
        }
        done={props.onRedelivered}
      >
        Redeliver
      </ActionButton>
    </li>
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
      <ActionNotes action={action} />
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
