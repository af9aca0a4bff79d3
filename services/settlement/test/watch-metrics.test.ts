/**
 * The gauges the money alerts read from settlement, on /metrics: a settlement period that opened without its
 * payout being asked of the ledger (a scheduler that stopped, or a ledger that does not answer), transfers out of
 * escrow waiting, and the ETH the escrow and relayer wallets pay gas with. Real anvil, Postgres and NATS; the
 * business clock is the test's.
 */
import { TestClock, testWallets } from '@paygate/testing';
import { useSettlementHarness } from './harness';

describe('settlement watch gauges', () => {
  const h = useSettlementHarness('stlwatch', {
    // Noon UTC: the DAILY period opened 12 h ago, far more than 10 scheduler passes of 1 min.
    clock: new TestClock('2026-12-01T12:00:00.000Z'),
    overrides: {
      RELAYER_PRIVATE_KEY: testWallets.relayer.privateKey,
      RELAYER_MIN_BALANCE_WEI: '1000',
      SCHEDULER_INTERVAL_MS: '60000',
    },
  });

  async function gauge(name: string, labels: Record<string, string> = {}): Promise<number | undefined> {
    const text = await (
      await fetch(`${h.service.url}/metrics`, { signal: AbortSignal.timeout(10_000) })
    ).text();
    const line = text
      .split('\n')
      .find(
        (l) =>
          l.startsWith(`${name}{`) && Object.entries(labels).every(([k, v]) => l.includes(`${k}="${v}"`)),
      );
    return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
  }

  it('counts a period no settlement was created for, then one whose payout the ledger never reserved', async () => {
    // A seller scheduled for today (the scheduler's passes are a minute apart; the test runs them).
    await h.db
      .insertInto('sellers')
      .values({
        seller_id: 'sel_watch',
        revision: 1,
        payout_address: testWallets.seller.address,
        settlement_frequency: 'DAILY',
        minimum_settlement_micro: 10_000_000n,
        last_scheduled_period: 'D:2026-12-01',
      })
      .execute();
    expect(await gauge('settlement_periods_overdue', { stage: 'unscheduled' })).toBe(0);
    // The next day at noon, no pass has run: its period is missed.
    h.clock.set('2026-12-02T12:00:00.000Z');
    expect(await gauge('settlement_periods_overdue', { stage: 'unscheduled' })).toBe(1);
    expect(await gauge('settlement_periods_overdue', { stage: 'unreserved' })).toBe(0);

    h.ledger.withholdAll = true; // the ledger is away: the settlement stays pending
    await h.service.scheduler.runOnce();
    expect(await gauge('settlement_periods_overdue', { stage: 'unscheduled' })).toBe(0);
    // Created just now (created_at is the scheduler's clock, the test's): not overdue yet.
    expect(await gauge('settlement_periods_overdue', { stage: 'unreserved' })).toBe(0);

    // Still pending an hour later (the ledger never decided its payout): overdue.
    await h.db
      .updateTable('settlements')
      .set({ created_at: new Date(h.clock.nowMs() - 3_600_000) })
      .where('seller_id', '=', 'sel_watch')
      .execute();
    expect(await gauge('settlement_periods_overdue', { stage: 'unreserved' })).toBe(1);
  });

  it('reports the gas wallets against their floor, and the transfers waiting by kind', async () => {
    const escrowWei = await h.chain.anvil.provider.getBalance(testWallets.escrow.address);
    const relayerWei = await h.chain.anvil.provider.getBalance(testWallets.relayer.address);
    expect(await gauge('settlement_gas_balance_wei', { wallet: 'escrow' })).toBe(Number(escrowWei));
    expect(await gauge('settlement_gas_balance_wei', { wallet: 'relayer' })).toBe(Number(relayerWei));
    expect(await gauge('settlement_gas_min_balance_wei', { wallet: 'relayer' })).toBe(1000);
    for (const kind of ['payout', 'refund', 'platform_payout'])
      expect(await gauge('settlement_transfers_pending', { kind })).toBe(0);
  });
});
