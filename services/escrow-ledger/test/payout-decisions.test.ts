/**
 * The ledger decides what leaves escrow to sellers and the treasury, over real Postgres and NATS: settlement's
 * `settlement.due` / `revenue.payout_requested` are reserved (or refused) in the ledger's own inbox transaction,
 * with `payout.reserved` / `payout.refused` in its outbox; only settlement's `payout.failed` gives a reservation back,
 * and only its `settlement.completed` / `revenue.paid_out` books it out of escrow.
 *
 * The faults of the request/answer handshake these replace: a reservation whose answer was lost and that settlement
 * had not yet claimed was cancelled by the ledger's sweep after PAYOUT_UNCLAIMED_AFTER_MS, even when settlement then
 * sent it (make chaos: payouts failed unsent, or settlement.completed dead-lettered for a cancelled reservation).
 */
import { randomUUID } from 'node:crypto';
import type { EventData, Subject } from '@paygate/contracts';
import { openSchema, waitFor } from '@paygate/testing';
import { type Kysely, sql } from 'kysely';
import { releaseDueHolds } from '../src/holds/release';
import { accountBalance } from '../src/ledger/entries';
import { type LedgerHarness, paymentData, startLedgerHarness } from './helpers';

const PAYOUT_ADDRESS = '0x90f79bf6eb2c4f870365e785982e1f101e93b906';
const NEW_PAYOUT_ADDRESS = '0x15d34aaf54267db7d7c367839aaf71a00a2c6a65';
const TREASURY = '0x976ea74026e726554db657fa54763abd0c3a0aa9';
const TX_HASH = `0x${'ab'.repeat(32)}`;

let h: LedgerHarness;
let db: Kysely<any>;
let revision = 0;

beforeAll(async () => {
  h = await startLedgerHarness('payoutdecide');
  db = openSchema(h.env.schemaFor('escrow-ledger'));
  await sellerUpdated(h.sellerId, PAYOUT_ADDRESS);
  await sellerUpdated(h.otherSellerId, PAYOUT_ADDRESS);
});
afterAll(async () => {
  await db?.destroy();
  await h?.stop();
});

/**
 * Publishes an event as its owner's outbox relay would (`id` for a redelivered copy of the same event, under a
 * message id of its own so the stream does not drop it as a duplicate).
 */
function publish<S extends Subject>(type: S, data: EventData<S>, id?: string): Promise<string> {
  return h.publish(type, data, { id, msgId: randomUUID() });
}

async function sellerUpdated(sellerId: string, payoutAddress: string) {
  revision += 1;
  await publish('seller.updated', {
    sellerId,
    revision,
    walletAddress: PAYOUT_ADDRESS,
    payoutAddress,
    publishableKey: `pk_test_${sellerId}_0123456789`,
    apiKeyVersion: 1,
    webhookUrl: null,
    webhookSecretVersion: 0,
    settlementFrequency: 'DAILY',
    minimumSettlement: '1',
    updatedAt: new Date().toISOString(),
  });
  await waitFor(
    async () =>
      (
        await sql<{ payout_address: string }>`select payout_address from seller_payout_addresses
          where seller_id = ${sellerId}`.execute(db)
      ).rows[0]?.payout_address === payoutAddress,
    { message: 'the ledger’s view of the payout address' },
  );
}

const due = (settlementId: string, sellerId = h.sellerId, minimumAmount = '1') =>
  publish('settlement.due', {
    settlementId,
    sellerId,
    minimumAmount,
    dueAt: new Date().toISOString(),
  });

/** The ledger's payout decisions (payout.reserved / payout.refused) for one payout id, as its outbox holds them. */
async function decisionsOf(payoutId: string): Promise<Array<{ type: string; data: any }>> {
  const rows = await sql<{ envelope: any }>`select envelope from outbox
      where envelope->>'type' in ('payout.reserved', 'payout.refused')
        and envelope->'data'->>'payoutId' = ${payoutId} order by created_at`.execute(db);
  return rows.rows.map((row) => {
    const envelope = typeof row.envelope === 'string' ? JSON.parse(row.envelope) : row.envelope;
    return { type: envelope.type, data: envelope.data };
  });
}

const decided = (payoutId: string, count = 1) =>
  waitFor(
    async () => {
      const decisions = await decisionsOf(payoutId);
      return decisions.length >= count ? decisions : undefined;
    },
    { message: `the ledger's decision of ${payoutId}` },
  );

const reservationOf = async (settlementId: string) =>
  (
    await sql<{ status: string; amount_micro: bigint }>`select status, amount_micro from payout_reservations
      where settlement_id = ${settlementId}`.execute(db)
  ).rows[0];

const processed = (consumer: string, eventId: string) =>
  waitFor(
    async () =>
      (await sql`select 1 from inbox where consumer = ${consumer} and event_id = ${eventId}`.execute(db)).rows
        .length > 0,
    { message: `${consumer} processed ${eventId}` },
  );

async function releasedPayment(amount: string, sellerId = h.sellerId) {
  const payment = paymentData(sellerId, { amount, holdPeriodHours: 0 });
  await h.publish('payment.confirmed', payment);
  await waitFor(
    async () =>
      (await sql<{ id: string }>`select id from transactions where tx_hash = ${payment.txHash}`.execute(db))
        .rows[0],
    { message: 'payment booked' },
  );
  await releaseDueHolds(h.ledger.ctx, h.ledger.deps, 100);
}

test('a reservation settlement has not sent yet is never given back, however long it waits; its completion books it out once', async () => {
  await releasedPayment('10'); // 9.5 for the seller
  await due('stl_waits');
  const [decision] = await decided('stl_waits');
  expect(decision).toMatchObject({
    type: 'payout.reserved',
    data: {
      payoutId: 'stl_waits',
      kind: 'seller',
      sellerId: h.sellerId,
      amount: '9.5',
      payoutAddress: PAYOUT_ADDRESS,
    },
  });
  // Settlement is slow to send it (a lost answer on the old path: the sweep cancelled it after 10 minutes).
  h.clock.advanceHours(6);
  // A second due of the same settlement (settle-now, a redelivery) changes nothing.
  await processed('ledger-settlement-due', await due('stl_waits'));
  expect(await reservationOf('stl_waits')).toEqual({ status: 'reserved', amount_micro: 9_500_000n });
  expect(await accountBalance(db, 'seller_payout_pending', h.sellerId)).toBe(9_500_000n);
  expect(await decisionsOf('stl_waits')).toHaveLength(1);

  const completed = {
    settlementId: 'stl_waits',
    sellerId: h.sellerId,
    amount: '9.5',
    payoutAddress: PAYOUT_ADDRESS,
    txHash: TX_HASH,
    completedAt: new Date().toISOString(),
  };
  const id = await publish('settlement.completed', completed);
  await processed('ledger-settlement-completed', id);
  // Redelivered, and a second event of the same payout: booked once.
  await publish('settlement.completed', completed, id);
  await processed('ledger-settlement-completed', await publish('settlement.completed', completed));
  expect(await reservationOf('stl_waits')).toMatchObject({ status: 'completed' });
  expect(await accountBalance(db, 'seller_payout_pending', h.sellerId)).toBe(0n);
  expect(await accountBalance(db, 'seller_available', h.sellerId)).toBe(0n);
  const sent = await sql<{ n: number }>`select count(*)::int as n from journal_entries
      where idempotency_key = 'payout:stl_waits'`.execute(db);
  expect(sent.rows[0]!.n).toBe(1);
});

test('below the minimum: refused with what is available, and decided again under the same id once enough is', async () => {
  await releasedPayment('2', h.otherSellerId); // 1.9
  await due('stl_refused', h.otherSellerId, '5');
  expect((await decided('stl_refused'))[0]).toMatchObject({
    type: 'payout.refused',
    data: { payoutId: 'stl_refused', reason: 'below_minimum', available: '1.9' },
  });
  expect(await accountBalance(db, 'seller_available', h.otherSellerId)).toBe(1_900_000n);
  await releasedPayment('4', h.otherSellerId); // + 3.8
  await due('stl_refused', h.otherSellerId, '5');
  expect((await decided('stl_refused', 2))[1]).toMatchObject({
    type: 'payout.reserved',
    data: { amount: '5.7', payoutAddress: PAYOUT_ADDRESS },
  });
});

test('the payout goes to the address of the ledger’s own view when it decides; a failed payout gives the money back once', async () => {
  await releasedPayment('20'); // 19
  await sellerUpdated(h.sellerId, NEW_PAYOUT_ADDRESS);
  await due('stl_fails');
  expect((await decided('stl_fails'))[0]!.data).toMatchObject({
    amount: '19',
    payoutAddress: NEW_PAYOUT_ADDRESS,
  });
  expect(await accountBalance(db, 'seller_payout_pending', h.sellerId)).toBe(19_000_000n);

  const failed = {
    payoutId: 'stl_fails',
    kind: 'seller' as const,
    sellerId: h.sellerId,
    amount: '19',
    reason: 'transaction reverted',
    failedAt: new Date().toISOString(),
  };
  const id = await publish('payout.failed', failed);
  await processed('ledger-payout-failed', id);
  await publish('payout.failed', failed, id); // redelivered
  await processed('ledger-payout-failed', await publish('payout.failed', failed)); // a second event
  expect(await reservationOf('stl_fails')).toMatchObject({ status: 'cancelled' });
  expect(await accountBalance(db, 'seller_payout_pending', h.sellerId)).toBe(0n);
  expect(await accountBalance(db, 'seller_available', h.sellerId)).toBe(19_000_000n);
  const givenBack = await sql<{ n: number }>`select count(*)::int as n from journal_entries
      where idempotency_key = 'payout_cancel:stl_fails'`.execute(db);
  expect(givenBack.rows[0]!.n).toBe(1);
  const stillPending = await sql`select id from transactions where settlement_id = 'stl_fails'`.execute(db);
  expect(stillPending.rows).toEqual([]);
  // The money goes out with the next payout.
  await due('stl_after_failure');
  expect((await decided('stl_after_failure'))[0]).toMatchObject({
    type: 'payout.reserved',
    data: { amount: '19' },
  });
});

test('platform payouts: the whole revenue reserved once to the treasury the request names; nothing left refuses; a failure gives it back', async () => {
  await releasedPayment('100'); // 5 of platform revenue, with the fees of the payments before
  const revenue = await accountBalance(db, 'platform_revenue');
  expect(revenue).toBeGreaterThan(0n);
  const request = { payoutId: 'ppo_one', treasuryAddress: TREASURY, requestedAt: new Date().toISOString() };
  const id = await publish('revenue.payout_requested', request);
  await publish('revenue.payout_requested', request); // a copy under another event id
  await publish('revenue.payout_requested', { ...request, payoutId: 'ppo_two' });
  const [reserved] = await decided('ppo_one');
  expect(reserved).toMatchObject({
    type: 'payout.reserved',
    data: { kind: 'platform', sellerId: null, payoutAddress: TREASURY },
  });
  expect((await decided('ppo_two'))[0]).toMatchObject({
    type: 'payout.refused',
    data: { reason: 'nothing_available' },
  });
  await processed('ledger-platform-payout-requested', id);
  expect(await decisionsOf('ppo_one')).toHaveLength(1);
  expect(await accountBalance(db, 'platform_payout_pending')).toBe(revenue);
  await processed(
    'ledger-payout-failed',
    await publish('payout.failed', {
      payoutId: 'ppo_one',
      kind: 'platform',
      sellerId: null,
      amount: reserved!.data.amount,
      reason: 'not sent: exceeds_transfer_cap',
      failedAt: new Date().toISOString(),
    }),
  );
  expect(await accountBalance(db, 'platform_payout_pending')).toBe(0n);
  expect(await accountBalance(db, 'platform_revenue')).toBe(revenue);
});
