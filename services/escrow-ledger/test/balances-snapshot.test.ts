import { parseUsdc } from '@paygate/money';
import { releaseDueHolds } from '../src/holds/release';
import {
  bookClaimedPayments,
  claimedPaymentOf,
  type LedgerHarness,
  paymentData,
  startLedgerHarness,
} from './helpers';

/**
 * GET /api/v1/balances reads every balance in one snapshot. Read one by one, a hold released between the reads
 * showed the seller's money both held and available (a clean-clone run of the dashboard journey saw $0.2375
 * twice). Here holds are released one transaction at a time while the seller reads its balances over and over:
 * every read must add up to what the seller was paid.
 */
const PAYMENTS = 40;

let h: LedgerHarness;
beforeAll(async () => {
  h = await startLedgerHarness('ledgerbal');
});
afterAll(async () => {
  await h?.stop();
});

it('held + available is what the seller was paid in every read, while holds are released', async () => {
  const payments = Array.from({ length: PAYMENTS }, () => paymentData(h.sellerId, { amount: '1' }));
  await h.ledger.ctx.db
    .transaction()
    .execute((trx) => bookClaimedPayments(trx, payments.map(claimedPaymentOf), h.ledger.deps));
  const paidToSeller = parseUsdc('0.95') * BigInt(PAYMENTS);
  const read = async () => {
    const { status, body } = await h.http('/api/v1/balances');
    expect(status).toBe(200);
    return { held: parseUsdc(body.held), available: parseUsdc(body.available) };
  };
  expect(await read()).toEqual({ held: paidToSeller, available: 0n });

  h.clock.advanceHours(25);
  let releasing = true;
  const releases = (async () => {
    try {
      // One hold per transaction: as many moments between releases as there are holds.
      for (let i = 0; i < PAYMENTS; i++) await releaseDueHolds(h.ledger.ctx, h.ledger.deps, 1);
    } finally {
      releasing = false;
    }
  })();
  const sums: bigint[] = [];
  const readers = Array.from({ length: 3 }, async () => {
    while (releasing) {
      const { held, available } = await read();
      sums.push(held + available);
    }
  });
  await Promise.all([releases, ...readers]);

  expect(sums.length).toBeGreaterThan(PAYMENTS / 2);
  expect(sums.filter((sum) => sum !== paidToSeller)).toEqual([]);
  expect(await read()).toEqual({ held: 0n, available: paidToSeller });
});
