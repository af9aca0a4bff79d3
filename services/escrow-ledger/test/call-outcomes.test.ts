import type { EventData } from '@paygate/contracts';
import { openSchema, waitFor, waitForConsumerIdle } from '@paygate/testing';
import type { Kysely } from 'kysely';
import { type LedgerHarness, observedData, paymentData, startLedgerHarness } from './helpers';

/**
 * The seller's transactions say what became of a paid call: payment.call_failed makes it failed_retryable with the
 * retry window (failed once the window passed), payment.call_recovered served again; each event counts once,
 * whatever its order or a redelivery.
 */
let h: LedgerHarness;
let db: Kysely<any>;

beforeAll(async () => {
  h = await startLedgerHarness('ledgercall');
  db = openSchema(h.env.schemaFor('escrow-ledger'));
});
afterAll(async () => {
  await db?.destroy();
  await h?.stop();
});

const TEN_MINUTES_MS = 600_000;

/** A booked x402 payment of the seller: its payment data and its transaction id. */
async function pay() {
  const payment = paymentData(h.sellerId, { holdPeriodHours: 48 });
  await h.publish('transfer.observed', observedData(payment));
  await h.publish('payment.confirmed', payment);
  return { payment, transactionId: await transactionIdOf(payment) };
}

const transactionIdOf = (payment: EventData<'payment.confirmed'>) =>
  waitFor(async () => {
    const { body } = await h.http(`/api/v1/transactions?txHash=${payment.txHash}`);
    return body.data[0]?.transactionId as string | undefined;
  });

function failure(
  payment: EventData<'payment.confirmed'>,
  overrides: Partial<EventData<'payment.call_failed'>> = {},
): EventData<'payment.call_failed'> {
  const failedAt = h.clock.now();
  return {
    paymentId: payment.paymentId,
    sellerId: payment.sellerId,
    skillId: payment.skillId,
    attempt: 1,
    upstreamOutcome: 'error_status',
    upstreamStatus: 502,
    failedAt: failedAt.toISOString(),
    retryUntil: new Date(failedAt.getTime() + TEN_MINUTES_MS).toISOString(),
    ...overrides,
  };
}

const recovery = (
  payment: EventData<'payment.confirmed'>,
  attempt: number,
): EventData<'payment.call_recovered'> => ({
  paymentId: payment.paymentId,
  sellerId: payment.sellerId,
  attempt,
  upstreamStatus: 200,
  servedAt: new Date(h.clock.nowMs() + 60_000).toISOString(),
});

/** The transaction as the list and the detail route show it, once `ready` accepts the list's row. */
async function shown(transactionId: string, ready: (row: any) => boolean) {
  const listed = await waitFor(async () => {
    const { body } = await h.http('/api/v1/transactions?limit=200');
    const row = body.data.find((t: any) => t.transactionId === transactionId);
    return row && ready(row) ? row : undefined;
  });
  const detail = await h.http(`/api/v1/transactions/${transactionId}`);
  expect(detail.status).toBe(200);
  return { listed, detail: detail.body };
}

describe('escrow-ledger: call outcomes on the seller transactions', () => {
  it('a payment whose call was not reported failed is served, with no failure fields', async () => {
    const { transactionId } = await pay();
    const { listed, detail } = await shown(transactionId, () => true);
    for (const view of [listed, detail]) {
      expect(view).toMatchObject({
        callStatus: 'served',
        callFailedAt: null,
        upstreamOutcome: null,
        upstreamStatus: null,
        retryUntil: null,
        callRecoveredAt: null,
      });
    }
  });

  it('a seller failure shows failed_retryable with the window, failed once it passed; a retry served makes it served', async () => {
    const { payment, transactionId } = await pay();
    const failed = failure(payment);
    await h.publish('payment.call_failed', failed);
    const { listed, detail } = await shown(transactionId, (t) => t.callStatus !== 'served');
    const expected = {
      callStatus: 'failed_retryable',
      callFailedAt: failed.failedAt,
      upstreamOutcome: 'error_status',
      upstreamStatus: 502,
      retryUntil: failed.retryUntil,
      callRecoveredAt: null,
    };
    expect(listed).toMatchObject(expected);
    expect(detail).toMatchObject(expected);

    // The window passes with no retry served: failed.
    h.clock.set(Date.parse(failed.retryUntil) + 1000);
    const late = await shown(transactionId, () => true);
    expect(late.listed).toMatchObject({ ...expected, callStatus: 'failed' });
    h.clock.set(failed.failedAt);

    // A retry within the window was served (attempt 2): served again, the failure still told.
    const served = recovery(payment, 2);
    await h.publish('payment.call_recovered', served);
    const after = await shown(transactionId, (t) => t.callStatus === 'served');
    expect(after.listed).toMatchObject({
      ...expected,
      callStatus: 'served',
      callRecoveredAt: served.servedAt,
    });
    expect(after.detail).toMatchObject({ callStatus: 'served', callRecoveredAt: served.servedAt });
  });

  it('counts each event once, in any order, and before the payment is booked', async () => {
    const payment = paymentData(h.sellerId, { holdPeriodHours: 48 });
    // The retry's success (attempt 3) arrives before the failures (attempts 1 and 2), and all before the payment.
    await h.publish('payment.call_recovered', recovery(payment, 3));
    const second = failure(payment, { attempt: 2, upstreamOutcome: 'timeout', upstreamStatus: null });
    const secondId = await h.publish('payment.call_failed', second);
    await h.publish('payment.call_failed', failure(payment));
    // The same event delivered again (past JetStream's duplicate window: another message id).
    await h.publish('payment.call_failed', second, { id: secondId, msgId: `${secondId}-again` });
    await h.publish('transfer.observed', observedData(payment));
    await h.publish('payment.confirmed', payment);
    await waitForConsumerIdle(h.bus, 'ledger-payment-call-failed');
    await waitForConsumerIdle(h.bus, 'ledger-payment-call-recovered');
    const attempts = await db
      .selectFrom('payment_call_attempts')
      .select(['attempt', 'outcome'])
      .where('payment_id', '=', payment.paymentId)
      .orderBy('attempt')
      .execute();
    expect(attempts).toEqual([
      { attempt: 1, outcome: 'failed' },
      { attempt: 2, outcome: 'failed' },
      { attempt: 3, outcome: 'served' },
    ]);
    const transactionId = await transactionIdOf(payment);
    const { listed } = await shown(transactionId, () => true);
    // The highest attempt decides; the latest failure says how the seller failed.
    expect(listed).toMatchObject({
      callStatus: 'served',
      upstreamOutcome: 'timeout',
      upstreamStatus: null,
      retryUntil: second.retryUntil,
    });
  });
});
