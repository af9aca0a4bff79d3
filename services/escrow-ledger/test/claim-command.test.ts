import { openSchema, waitFor } from '@paygate/testing';
import { type Kysely, sql } from 'kysely';
import { type RunningEscrowLedger, startEscrowLedger } from '../src';
import { type LedgerHarness, observedData, paymentData, startLedgerHarness } from './helpers';

/**
 * A payment is booked by one command: `ledger.claim_transfer` with its payment claims the transfer, books it
 * (transfer row, transaction, 95/5 entries) and publishes payment.confirmed through the ledger's outbox in one
 * transaction. Retried, raced by two replicas, or with the chain-indexer's transfer.observed before or after it,
 * the payment is booked exactly once and payment.confirmed published once, by the ledger.
 */

let h: LedgerHarness;
let replica: RunningEscrowLedger;
let db: Kysely<any>;

beforeAll(async () => {
  h = await startLedgerHarness('claimcommand');
  // A second replica on the same schema and bus namespace: both answer in the `escrow-ledger` queue group.
  replica = await startEscrowLedger(h.ledger.deps.config);
  db = openSchema(h.env.schemaFor('escrow-ledger'));
});
afterAll(async () => {
  await replica?.stop();
  await db?.destroy();
  await h?.stop();
});

/** What the books and the outbox hold for one payment's transfer. */
async function booked(payment: ReturnType<typeof paymentData>) {
  const txHash = payment.txHash.toLowerCase();
  const count = async (query: ReturnType<typeof sql<{ n: number }>>) => (await query.execute(db)).rows[0]!.n;
  return {
    transactions: await count(sql`select count(*)::int as n from transactions where tx_hash = ${txHash}`),
    paymentEntries: await count(
      sql`select count(*)::int as n from journal_entries
        where entry_type = 'payment' and idempotency_key like ${`%${txHash}%`}`,
    ),
    transferEntries: await count(
      sql`select count(*)::int as n from journal_entries
        where entry_type = 'transfer_in' and idempotency_key like ${`%${txHash}%`}`,
    ),
    confirmedEvents: await count(
      sql`select count(*)::int as n from outbox
        where subject = 'payment.confirmed' and envelope->'data'->>'paymentId' = ${payment.paymentId}
          and envelope->>'producer' = 'escrow-ledger'`,
    ),
    conflicts: await count(sql`select count(*)::int as n from payment_conflicts where tx_hash = ${txHash}`),
  };
}

const once = { transactions: 1, paymentEntries: 1, transferEntries: 1, confirmedEvents: 1, conflicts: 0 };

describe('ledger.claim_transfer books its payment', () => {
  test('the command retried: booked once, every answer names the same payment and transaction', async () => {
    const payment = paymentData(h.sellerId, { amount: '2.5' });
    const first = await h.claim(payment);
    expect(first).toMatchObject({ ok: true, fresh: true, paymentId: payment.paymentId });
    const transactionId = (first as { transactionId?: string }).transactionId;
    expect(transactionId).toMatch(/^txn_/);
    for (let i = 0; i < 3; i++) {
      expect(await h.claim(payment)).toMatchObject({
        ok: true,
        fresh: false,
        paymentId: payment.paymentId,
        transactionId,
      });
    }
    // A repeat under another payment id (a checkout redelivery draws a new one) is answered with the first.
    expect(await h.claim({ ...payment, paymentId: `${payment.paymentId}_again` })).toMatchObject({
      ok: true,
      fresh: false,
      paymentId: payment.paymentId,
      transactionId,
    });
    expect(await booked(payment)).toEqual(once);
    const row = (
      await sql<{
        seller_share_micro: bigint;
        escrow_status: string;
      }>`select seller_share_micro, escrow_status
        from transactions where id = ${transactionId}`.execute(db)
    ).rows[0]!;
    expect(row).toEqual({ seller_share_micro: 2_375_000n, escrow_status: 'held' });
  });

  test('transfer.observed before the command: the command books the observed transfer once', async () => {
    const payment = paymentData(h.sellerId, { amount: '3' });
    await h.publish('transfer.observed', observedData(payment));
    await waitFor(
      async () =>
        (await sql`select 1 from transfers where tx_hash = ${payment.txHash.toLowerCase()}`.execute(db)).rows
          .length > 0,
      { message: 'transfer.observed not booked' },
    );
    expect(await h.claim(payment)).toMatchObject({ ok: true, fresh: true, paymentId: payment.paymentId });
    expect(await h.claim(payment)).toMatchObject({ ok: true, fresh: false, paymentId: payment.paymentId });
    expect(await booked(payment)).toEqual(once);
  });

  test('transfer.observed after the command confirms the booking, never books it again', async () => {
    const payment = paymentData(h.sellerId, { amount: '4' });
    expect(await h.claim(payment)).toMatchObject({ ok: true, fresh: true });
    const observed = observedData(payment);
    await h.publish('transfer.observed', observed);
    // Delivered twice (another message id): the inbox and the books both hold it once.
    await h.publish('transfer.observed', observed, { msgId: `again-${payment.txHash}` });
    await waitFor(
      async () =>
        (
          await sql<{ block_hash: string | null }>`select block_hash from transfers
            where tx_hash = ${payment.txHash.toLowerCase()}`.execute(db)
        ).rows[0]?.block_hash === observed.blockHash.toLowerCase(),
      { message: 'the observation did not confirm the booked transfer' },
    );
    expect(await h.claim(payment)).toMatchObject({ ok: true, fresh: false, paymentId: payment.paymentId });
    expect(await booked(payment)).toEqual(once);
  });

  test('a payment the books refuse (more than its observed transfer): a conflict, no payment.confirmed', async () => {
    const payment = paymentData(h.sellerId, { amount: '6' });
    await h.publish('transfer.observed', observedData(payment, '5'));
    await waitFor(
      async () =>
        (await sql`select 1 from transfers where tx_hash = ${payment.txHash.toLowerCase()}`.execute(db)).rows
          .length > 0,
      { message: 'transfer.observed not booked' },
    );
    const reply = await h.claim(payment);
    expect(reply).toMatchObject({ ok: true, fresh: true });
    expect(reply).not.toHaveProperty('transactionId');
    expect(await booked(payment)).toEqual({
      transactions: 0,
      paymentEntries: 0,
      transferEntries: 1,
      confirmedEvents: 0,
      conflicts: 1,
    });
  });

  test('two replicas receive the same request at once: one booking, one answer for all', async () => {
    const payment = paymentData(h.sellerId, { amount: '1.25' });
    const replies = await Promise.all(Array.from({ length: 12 }, () => h.claim(payment)));
    expect(replies.every((reply) => reply.ok)).toBe(true);
    expect(replies.filter((reply) => reply.ok && reply.fresh)).toHaveLength(1);
    const transactionIds = new Set(
      replies.map((reply) => (reply as { transactionId?: string }).transactionId),
    );
    expect([...transactionIds]).toHaveLength(1);
    expect(replies.every((reply) => (reply as { paymentId?: string }).paymentId === payment.paymentId)).toBe(
      true,
    );
    expect(await booked(payment)).toEqual(once);
  });

  test('payment.confirmed is the ledger’s fact: published once to the stream, and not consumed by the ledger', async () => {
    const payment = paymentData(h.sellerId, { amount: '5' });
    await h.claim(payment);
    await h.claim(payment);
    await waitFor(
      async () =>
        (
          await sql<{ n: number }>`select count(*)::int as n from outbox
            where subject = 'payment.confirmed' and published_at is not null
              and envelope->'data'->>'paymentId' = ${payment.paymentId}`.execute(db)
        ).rows[0]!.n === 1,
      { message: 'payment.confirmed not relayed' },
    );
    const event = (
      await sql<{ envelope: any }>`select envelope from outbox
        where subject = 'payment.confirmed' and envelope->'data'->>'paymentId' = ${payment.paymentId}`.execute(
        db,
      )
    ).rows[0]!.envelope;
    expect(event).toMatchObject({
      producer: 'escrow-ledger',
      data: {
        paymentId: payment.paymentId,
        sellerId: h.sellerId,
        amount: '5',
        txHash: payment.txHash.toLowerCase(),
        holdPeriodHours: payment.holdPeriodHours,
      },
    });
    const consumers = await h.bus.jsm.consumers.list(h.bus.eventsStream).next();
    expect(consumers.map((consumer) => consumer.name)).not.toContain('ledger-payment-confirmed');
  });
});
