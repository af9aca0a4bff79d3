/** The end of a run's faults: the system left alone until nothing is in flight (every outbox, inbox and job done). */
import pg from 'pg';
import { SCHEMAS } from '../service-schemas';

/** Rows still in flight: nothing of this may be left 120 s after the last fault. */
export async function pendingWork(client: pg.Client): Promise<Record<string, number>> {
  const pending: Record<string, number> = {};
  for (const schema of Object.values(SCHEMAS)) {
    const r = await client.query(
      `select count(*)::int as n from ${schema}.outbox where published_at is null`,
    );
    pending[`${schema}.outbox unpublished`] = r.rows[0].n;
  }
  const q = async (label: string, text: string) => {
    pending[label] = (await client.query(text)).rows[0].n;
  };
  await q(
    'settlement.outgoing_transfers open',
    `select count(*)::int as n from settlement.outgoing_transfers where status not in ('confirmed','failed')`,
  );
  await q(
    'settlement.settlements pending/sending',
    `select count(*)::int as n from settlement.settlements where status in ('pending','sending')`,
  );
  await q(
    'settlement.refunds sending',
    `select count(*)::int as n from settlement.refunds where status = 'sending'`,
  );
  await q('ledger.refunds pending', `select count(*)::int as n from ledger.refunds where status = 'pending'`);
  await q(
    'notifier.webhook_deliveries pending',
    `select count(*)::int as n from notifier.webhook_deliveries where status = 'pending'`,
  );
  // A payout the ledger reserved and settlement has not reported back (settlement.completed or payout.failed),
  // and a platform payout still waiting for the ledger's decision or its transfer.
  await q(
    'ledger.payout_reservations reserved',
    `select count(*)::int as n from ledger.payout_reservations where status = 'reserved'`,
  );
  await q(
    'ledger.platform_payouts reserved',
    `select count(*)::int as n from ledger.platform_payouts where status = 'reserved'`,
  );
  await q(
    'settlement.platform_payouts requested/sending',
    `select count(*)::int as n from settlement.platform_payouts where status in ('requested','sending')`,
  );
  // Unserved calls on their way back to the buyer: a window not closed yet, a closed call the ledger has not
  // recorded or decided, a refund booked and not in a payer's batch yet (a batch sent is a pending ledger refund).
  await q(
    'gateway.payment_claims retryable',
    `select count(*)::int as n from gateway.payment_claims where state = 'retryable' and kind <> 'subscription'`,
  );
  await q(
    'gateway.payment_claims unserved, unknown to the ledger',
    `select count(*)::int as n from gateway.payment_claims c where c.state = 'unserved'
        and not exists (select 1 from ledger.unserved_calls u where u.payment_id = c.id)`,
  );
  await q(
    'ledger.unserved_calls undecided',
    `select count(*)::int as n from ledger.unserved_calls where status = 'closed'`,
  );
  await q(
    'ledger.unserved_calls refunded, not in a batch',
    `select count(*)::int as n from ledger.unserved_calls where status = 'refunded' and batch_id is null`,
  );
  await q(
    'ledger.transactions payout_pending',
    `select count(*)::int as n from ledger.transactions where escrow_status = 'payout_pending'`,
  );
  return pending;
}

/** Waits until nothing is in flight for 2 s (pendingWork), up to `deadline`: when it became quiet, or null. */
export async function drainUntilQuiet(
  databaseUrl: string,
  deadline: number,
  log: (line: string) => void,
): Promise<number | null> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    let quietSince: number | undefined;
    let lastShown = 0;
    while (Date.now() < deadline) {
      const pending = await pendingWork(client).catch(() => ({ unreachable: 1 }));
      const busy = Object.entries(pending).filter(([, n]) => n > 0);
      if (busy.length === 0) {
        quietSince ??= Date.now();
        // Quiet for 2 s: events in flight between an outbox and an inbox have landed too.
        if (Date.now() - quietSince > 2000) return quietSince;
      } else {
        quietSince = undefined;
        if (Date.now() - lastShown > 5000) {
          lastShown = Date.now();
          log(`draining: ${busy.map(([what, n]) => `${what} ${n}`).join(', ')}`);
        }
      }
      await new Promise((r) => setTimeout(r, 500));
    }
    return null;
  } finally {
    await client.end().catch(() => undefined);
  }
}
