/**
 * Issue 19 ("Storm-proof"), found by make chaos (short seed 20261125): after a Postgres crash, ledger
 * transactions stayed `payout_pending` with no settlement open. The case reproduced here, over real Postgres and
 * NATS: the ledger commits a payout reservation, its answer is lost, and settlement asks again under another
 * settlement id (the next period), which finds nothing available. The sweep cancels the reservation nobody ever
 * asked to send, so the money is paid by the next settlement, and it never cancels one a payout claimed.
 */
import { requestRpc } from '@paygate/bus';
import type { RpcName, RpcRequest } from '@paygate/contracts';
import { parseUsdc } from '@paygate/money';
import { openSchema, waitFor } from '@paygate/testing';
import { type Kysely, sql } from 'kysely';
import { releaseDueHolds } from '../src/holds/release';
import { accountBalance } from '../src/ledger/entries';
import { sweepPayoutReservations } from '../src/payouts/sweep';
import { type LedgerHarness, paymentData, startLedgerHarness } from './helpers';

const PAYOUT_ADDRESS = '0x90F79bf6EB2c4f870365E785982E1f101E93b906';

let h: LedgerHarness;
let db: Kysely<any>;

beforeAll(async () => {
  h = await startLedgerHarness('payoutsweep', {
    PAYOUT_UNCLAIMED_AFTER_MS: '600000',
    PAYOUT_SWEEP_INTERVAL_MS: '600000', // the test runs the sweep itself
  });
  db = openSchema(h.env.schemaFor('escrow-ledger'));
});
afterAll(async () => {
  await db?.destroy();
  await h?.stop();
});

const rpc = <N extends RpcName>(name: N, body: RpcRequest<N>) =>
  requestRpc(h.bus, name, body, { timeoutMs: 5000 });
const reserve = (settlementId: string) =>
  rpc('ledger.reserve_payout', {
    settlementId,
    sellerId: h.sellerId,
    minimumAmount: '1',
    payoutAddress: PAYOUT_ADDRESS,
  });
const sweep = () => sweepPayoutReservations(h.ledger.ctx, h.ledger.deps);
const statusOf = async (id: string) =>
  (await sql<{ escrow_status: string }>`select escrow_status from transactions where id = ${id}`.execute(db))
    .rows[0]!.escrow_status;

async function releasedPayment(amount: string) {
  const payment = paymentData(h.sellerId, { amount, holdPeriodHours: 0 });
  await h.publish('payment.confirmed', payment);
  const txn = await waitFor(
    async () =>
      (await sql<{ id: string }>`select id from transactions where tx_hash = ${payment.txHash}`.execute(db))
        .rows[0],
    { message: 'payment booked' },
  );
  await releaseDueHolds(h.ledger.ctx, h.ledger.deps, 100);
  return txn.id;
}

test('a reservation whose answer was lost (settlement went on under another id) is cancelled; the money is paid next time', async () => {
  const txn = await releasedPayment('10'); // 9.5 for the seller
  // The ledger commits the reservation; the answer never reaches settlement (its transaction died with Postgres).
  expect(await reserve('stl_answer_lost')).toEqual({ ok: true, amount: '9.5' });
  // Settlement asks again in the next period, under another id: the money is held by the first reservation.
  expect(await reserve('stl_next_period')).toMatchObject({ ok: false, reason: 'nothing_available' });
  expect(await statusOf(txn)).toBe('payout_pending');

  // Within PAYOUT_UNCLAIMED_AFTER_MS nothing is touched (settlement may still be about to send it).
  expect(await sweep()).toEqual({ cancelled: [], repaired: 0 });
  h.clock.advanceHours(1);
  expect(await sweep()).toEqual({ cancelled: ['stl_answer_lost'], repaired: 0 });
  expect(await statusOf(txn)).toBe('available');
  expect(await accountBalance(db, 'seller_available', h.sellerId)).toBe(9_500_000n);
  expect(await accountBalance(db, 'seller_payout_pending', h.sellerId)).toBe(0n);
  // Nothing can be signed for it any more, and the next settlement pays the money.
  expect(
    await rpc('ledger.authorize_transfer', {
      kind: 'payout',
      id: 'stl_answer_lost',
      to: PAYOUT_ADDRESS,
      amount: '9.5',
    }),
  ).toMatchObject({ ok: false, reason: 'not_pending' });
  expect(await reserve('stl_after_sweep')).toEqual({ ok: true, amount: '9.5' });
  expect(await statusOf(txn)).toBe('payout_pending');
});

test('a reservation its payout claimed (authorize_transfer) is never swept, however long it takes to send', async () => {
  const txn = await releasedPayment('4'); // 3.8
  const claimed = await reserve('stl_claimed');
  expect(claimed).toEqual({ ok: true, amount: '3.8' });
  expect(
    await rpc('ledger.authorize_transfer', {
      kind: 'payout',
      id: 'stl_claimed',
      to: PAYOUT_ADDRESS,
      amount: '3.8',
    }),
  ).toEqual({ ok: true });
  h.clock.advanceHours(5);
  expect((await sweep()).cancelled).not.toContain('stl_claimed');
  expect(await statusOf(txn)).toBe('payout_pending');
});

test('a reservation settlement recorded (asked again with recorded) is never swept while its payout waits to be signed', async () => {
  // make chaos, seeds 1744858688 and 331752625 on a slow host: four payouts recorded at once waited 104 s behind
  // refunds to be signed; the sweep had cancelled their reservations at 77 s and the payouts failed unsent.
  const txn = await releasedPayment('2');
  const reserved = await reserve('stl_recorded');
  if (!reserved.ok) throw new Error('nothing reserved');
  expect(
    await rpc('ledger.reserve_payout', {
      settlementId: 'stl_recorded',
      sellerId: h.sellerId,
      minimumAmount: '1',
      payoutAddress: PAYOUT_ADDRESS,
      recorded: true,
    }),
  ).toEqual(reserved);
  h.clock.advanceHours(5);
  expect((await sweep()).cancelled).not.toContain('stl_recorded');
  expect(await statusOf(txn)).toBe('payout_pending');
  expect(
    await rpc('ledger.authorize_transfer', {
      kind: 'payout',
      id: 'stl_recorded',
      to: PAYOUT_ADDRESS,
      amount: reserved.amount,
    }),
  ).toEqual({ ok: true });
});

test('a reservation given back (swept, or cancel_payout) and asked for again under its id is refused as reservation_cancelled', async () => {
  // Settlement's answer was lost and it asked again only after the sweep gave the money back: the old amount in an
  // ok answer would have it record a payout that authorize_transfer refuses (it failed unsent).
  const txn = await releasedPayment('6');
  const reserved = await reserve('stl_swept_asked_again');
  if (!reserved.ok) throw new Error(`nothing reserved: ${JSON.stringify(reserved)}`);
  h.clock.advanceHours(1);
  expect((await sweep()).cancelled).toContain('stl_swept_asked_again');
  const refused = { ok: false, reason: 'reservation_cancelled', message: expect.any(String) };
  expect(await reserve('stl_swept_asked_again')).toEqual(refused);
  expect(
    await rpc('ledger.reserve_payout', {
      settlementId: 'stl_swept_asked_again',
      sellerId: h.sellerId,
      minimumAmount: '1',
      payoutAddress: PAYOUT_ADDRESS,
      recorded: true,
    }),
  ).toEqual(refused);
  // Nothing reserved again: the money stays available for the next settlement.
  expect(await statusOf(txn)).toBe('available');
  expect(await accountBalance(db, 'seller_available', h.sellerId)).toBeGreaterThanOrEqual(
    parseUsdc(reserved.amount),
  );

  const cancelled = await reserve('stl_cancelled_asked_again');
  expect(cancelled).toMatchObject({ ok: true });
  expect(await rpc('ledger.cancel_payout', { settlementId: 'stl_cancelled_asked_again' })).toEqual({
    ok: true,
    status: 'cancelled',
  });
  expect(await reserve('stl_cancelled_asked_again')).toEqual(refused);
  expect(await statusOf(txn)).toBe('available');
});

test('a payout_pending transaction whose reservation is no longer reserved follows its outcome', async () => {
  const txn = await releasedPayment('2');
  // (with what the earlier tests' swept reservations gave back)
  expect(await reserve('stl_cancelled_elsewhere')).toMatchObject({ ok: true });
  expect(await rpc('ledger.cancel_payout', { settlementId: 'stl_cancelled_elsewhere' })).toEqual({
    ok: true,
    status: 'cancelled',
  });
  // The state the chaos run ended in: the transaction still payout_pending, its reservation over.
  await sql`update transactions set escrow_status = 'payout_pending', settlement_id = 'stl_cancelled_elsewhere'
      where id = ${txn}`.execute(db);
  expect((await sweep()).repaired).toBe(1);
  expect(await statusOf(txn)).toBe('available');
});

test('a reservation asked again after the seller moved its payout address follows it, until its payout claimed it', async () => {
  await releasedPayment('3');
  const movedTo = '0x15d34AAf54267DB7D7c367839AAf71A00a2C6A65';
  const reserveTo = (payoutAddress: string) =>
    rpc('ledger.reserve_payout', {
      settlementId: 'stl_moved',
      sellerId: h.sellerId,
      minimumAmount: '1',
      payoutAddress,
    });
  const authorizeTo = (to: string, amount: string) =>
    rpc('ledger.authorize_transfer', { kind: 'payout', id: 'stl_moved', to, amount });
  const first = await reserveTo(PAYOUT_ADDRESS);
  if (!first.ok) throw new Error(`nothing reserved: ${JSON.stringify(first)}`);
  // Settlement's transaction died with Postgres before it recorded the payout; the seller moved its payout address
  // meanwhile, and settlement asks again with it: the same reservation, now to the new address.
  expect(await reserveTo(movedTo)).toEqual(first);
  expect(await authorizeTo(PAYOUT_ADDRESS, first.amount)).toMatchObject({
    ok: false,
    reason: 'recipient_differs',
  });
  expect(await authorizeTo(movedTo, first.amount)).toEqual({ ok: true });
  // Claimed by its payout: asking again with yet another address moves nothing.
  expect(await reserveTo('0x9965507D1a55bcC2695C58ba16FB37d819B0A4dc')).toEqual(first);
  expect(await authorizeTo('0x9965507D1a55bcC2695C58ba16FB37d819B0A4dc', first.amount)).toMatchObject({
    ok: false,
    reason: 'recipient_differs',
  });
  expect(await authorizeTo(movedTo, first.amount)).toEqual({ ok: true });
});

test('a platform payout reservation no payout claimed is cancelled, the revenue free again; a claimed one stays', async () => {
  await releasedPayment('20'); // 1.0 for the platform
  const treasuryAddress = '0x15d34AAf54267DB7D7c367839AAf71A00a2C6A65';
  // The ledger reserves; the operator's request dies before settlement records it (nothing will ever send it).
  const lost = await rpc('ledger.reserve_platform_payout', { payoutId: 'ppo_answer_lost', treasuryAddress });
  if (!lost.ok) throw new Error(`nothing reserved: ${lost.reason}`);
  const revenue = parseUsdc(lost.amount);
  expect(await accountBalance(db, 'platform_revenue')).toBe(0n);
  expect((await sweep()).cancelled).not.toContain('ppo_answer_lost');
  h.clock.advanceHours(1);
  expect((await sweep()).cancelled).toContain('ppo_answer_lost');
  expect(await accountBalance(db, 'platform_revenue')).toBe(revenue);
  expect(await accountBalance(db, 'platform_payout_pending')).toBe(0n);
  expect(
    await rpc('ledger.authorize_transfer', {
      kind: 'platform_payout',
      id: 'ppo_answer_lost',
      to: treasuryAddress,
      amount: lost.amount,
    }),
  ).toMatchObject({ ok: false, reason: 'not_pending' });

  const claimed = await rpc('ledger.reserve_platform_payout', { payoutId: 'ppo_claimed', treasuryAddress });
  if (!claimed.ok) throw new Error(`nothing reserved: ${claimed.reason}`);
  expect(
    await rpc('ledger.authorize_transfer', {
      kind: 'platform_payout',
      id: 'ppo_claimed',
      to: treasuryAddress,
      amount: claimed.amount,
    }),
  ).toEqual({ ok: true });
  h.clock.advanceHours(5);
  expect((await sweep()).cancelled).not.toContain('ppo_claimed');
  expect(await accountBalance(db, 'platform_payout_pending')).toBe(parseUsdc(claimed.amount));
});
