import { waitFor } from '@paygate/testing';
import { sql } from 'kysely';
import { releaseDueHolds } from '../src/holds/release';
import { accountBalance } from '../src/ledger/entries';
import { reconcile } from '../src/reconciliation/reconcile';
import { type LedgerHarness, OTHER_SELLER_KEY, paymentData, startLedgerHarness } from './helpers';

/**
 * Regression for the refund deadlock `make chaos` found (a seller refund answered 500 with `deadlock detected`):
 * the hold release posted one entry per due hold in one transaction, and post_entry creates an account on first
 * use. So a release that had already locked the platform's balance rows (for an earlier hold of its batch) then
 * created a seller's `seller_available` account, while that seller's refund had created the same account (not
 * yet committed) and waited for the platform rows: each waited for the other. The release now creates every
 * account its batch posts to before it locks any balance row (the order post_entries and refunds already keep).
 */
jest.setTimeout(30_000);

let h: LedgerHarness;
beforeAll(async () => {
  // Postgres aborts the transaction whose deadlock check finds the cycle, and a waiter checks once, deadlock_timeout
  // after it began to wait. The last test needs the refund to be the one aborted: the refund waits first, so its
  // check must come after the other side has joined the cycle (the default 1 s was too short on a busy CI host,
  // and the other side was aborted instead), and the other side's own check must come later still (it sets 60 s).
  h = await startLedgerHarness('ledgerrd', {}, { deadlock_timeout: '5s' });
});
afterAll(async () => {
  await h?.stop();
});

async function pay(sellerId: string, amount: string, holdPeriodHours: number): Promise<string> {
  const data = paymentData(sellerId, { amount, holdPeriodHours });
  await h.publish('payment.confirmed', data);
  return waitFor(
    async () =>
      (
        await sql<{ id: string }>`select id from transactions where payment_id = ${data.paymentId}`.execute(
          h.ledger.ctx.db,
        )
      ).rows[0]?.id,
    { message: `payment ${data.paymentId} booked`, timeoutMs: 10_000 },
  );
}

const refund = (transactionId: string, amount: string) =>
  h.http('/api/v1/refunds', { body: { transactionId, amount, reason: 'concurrent' } });

describe('refunds concurrent with the hold release', () => {
  test("a release batch that reaches a new seller's first release while that seller refunds: both commit", async () => {
    const { db } = h.ledger.ctx;
    // The platform's accounts exist (an earlier release and refund of the other seller created them).
    const earlier = await pay(h.otherSellerId, '1', 0);
    await releaseDueHolds(h.ledger.ctx, h.ledger.deps, 10);
    expect(
      (
        await h.http('/api/v1/refunds', {
          key: OTHER_SELLER_KEY,
          body: { transactionId: earlier, amount: '0.1', reason: 'warm-up' },
        })
      ).status,
    ).toBe(201);
    // The other seller's hold is due first: the release locks the platform's rows for it, then reaches the seller.
    await pay(h.otherSellerId, '1', 1);
    const toRefund = await pay(h.sellerId, '3', 24);
    await pay(h.sellerId, '2', 2);
    expect(
      (
        await sql`select 1 from accounts where kind = 'seller_available' and owner = ${h.sellerId}`.execute(
          db,
        )
      ).rows,
    ).toEqual([]);
    h.clock.advanceHours(3);

    // Whoever creates the seller's seller_available account pauses right after (its insert not yet committed):
    // the refund, which starts first. Meanwhile the release locks the platform's rows for the other seller's hold.
    await sql`create or replace function test_pause_after_account() returns trigger language plpgsql as $$
      begin
        if new.kind = 'seller_available' and new.owner = ${sql.lit(h.sellerId)} then
          perform pg_sleep(2);
        end if;
        return new;
      end $$`.execute(db);
    await sql`create trigger test_pause after insert on accounts for each row execute function test_pause_after_account()`.execute(
      db,
    );
    try {
      const refunding = refund(toRefund, '0.5');
      await waitFor(
        async () =>
          (
            await sql`select 1 from pg_stat_activity where query like '%ledger_account%' and wait_event = 'PgSleep' and pid <> pg_backend_pid()`.execute(
              db,
            )
          ).rows[0],
        { message: 'the refund pauses after creating the account', timeoutMs: 5_000, intervalMs: 20 },
      );
      const releasing = releaseDueHolds(h.ledger.ctx, h.ledger.deps, 10);
      const [answer, released] = await Promise.allSettled([refunding, releasing]);
      expect(released).toEqual({ status: 'fulfilled', value: 2 });
      expect(
        answer.status === 'fulfilled' ? [answer.value.status, answer.value.body?.error] : answer,
      ).toEqual([201, undefined]);
    } finally {
      await sql`drop trigger test_pause on accounts`.execute(db);
      await sql`drop function test_pause_after_account()`.execute(db);
    }
    const report = await reconcile(db, h.ledger.deps.config, await accountBalance(db, 'escrow_asset'));
    expect(report.differences).toEqual([]);
  });

  test('many refunds of one seller at once, while two replicas release its holds: no 500, no deadlock', async () => {
    const { db } = h.ledger.ctx;
    const held = await Promise.all(Array.from({ length: 12 }, () => pay(h.sellerId, '2', 1)));
    const released = await Promise.all(Array.from({ length: 12 }, () => pay(h.sellerId, '2', 0)));
    await releaseDueHolds(h.ledger.ctx, h.ledger.deps, 100);
    h.clock.advanceHours(2);
    const answers = await Promise.all([
      ...[...held, ...released].flatMap((id) => [refund(id, '0.7'), refund(id, '0.7')]),
      releaseDueHolds(h.ledger.ctx, h.ledger.deps, 3).then(() => ({ status: 0, body: null })),
      releaseDueHolds(h.ledger.ctx, h.ledger.deps, 3).then(() => ({ status: 0, body: null })),
    ]);
    const statuses = answers.filter((a) => a.status !== 0).map((a) => a.status);
    expect(statuses.filter((s) => s !== 201)).toEqual([]);
    const report = await reconcile(db, h.ledger.deps.config, await accountBalance(db, 'escrow_asset'));
    expect(report.differences).toEqual([]);
  });

  test('a refund Postgres aborts for a deadlock (its account locks met a transaction taking them in the other order) runs again: 201', async () => {
    const { db } = h.ledger.ctx;
    const toRefund = await pay(h.sellerId, '2', 24);
    await sql`select ledger_account('seller_available', ${h.sellerId})`.execute(db);
    let letGo!: () => void;
    const refundIsWaiting = new Promise<void>((resolve) => {
      letGo = resolve;
    });
    let holding!: () => void;
    const holdsSellerAvailable = new Promise<void>((resolve) => {
      holding = resolve;
    });
    // The other side as the chaos run's Postgres log showed it (a posting transaction of several statements): it
    // holds the seller's available account, then wants the platform's held account, which the refund (locking
    // its five accounts in id order) took before it reached the seller's.
    const other = db.transaction().execute(async (trx) => {
      await sql`set local deadlock_timeout = '60s'`.execute(trx);
      await sql`select 1 from accounts where kind = 'seller_available' and owner = ${h.sellerId}
        for no key update`.execute(trx);
      holding();
      await refundIsWaiting;
      await sql`select 1 from accounts where kind = 'platform_held' and owner = '' for no key update`.execute(
        trx,
      );
    });
    await holdsSellerAvailable;
    const refunding = refund(toRefund, '0.5');
    await waitFor(
      async () =>
        (
          await sql`select 1 from pg_stat_activity where state = 'active' and wait_event_type = 'Lock'
              and query like '%platform_held%seller_available%' and pid <> pg_backend_pid()`.execute(db)
        ).rows[0],
      { message: 'the refund waits for the seller account', timeoutMs: 5_000, intervalMs: 20 },
    );
    letGo();
    const [answer, otherOutcome] = await Promise.allSettled([refunding, other]);
    expect(otherOutcome.status).toBe('fulfilled');
    expect(answer.status === 'fulfilled' ? [answer.value.status, answer.value.body?.error] : answer).toEqual([
      201,
      undefined,
    ]);
    const report = await reconcile(db, h.ledger.deps.config, await accountBalance(db, 'escrow_asset'));
    expect(report.differences).toEqual([]);
  });
});
