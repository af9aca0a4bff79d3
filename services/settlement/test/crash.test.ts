import {
  countStreamMessages,
  mine,
  type ServiceProcess,
  setAutomine,
  testWallets,
  waitFor,
} from '@paygate/testing';
import { buildServiceBundles, spawnServiceBundle } from '@paygate/testing/service-bundles';
import { useSettlementHarness } from './harness';
import { publishEvent, refundInitiated } from './helpers';

// Each scenario starts the real process twice (a few seconds each on a loaded machine).
const SCENARIO_TIMEOUT_MS = 120_000;

/**
 * Crash safety, shown with the real process: settlement runs as a child (its main bundled as the images bundle
 * it); the test-only SETTLEMENT_CRASH_POINT hook makes it exit(137) right after recording a signed transaction, or
 * right after broadcasting it; it is then started again without the hook. The chain must hold exactly one transfer.
 */
describe('exactly one transfer on chain across crashes', () => {
  const children: ServiceProcess[] = [];
  beforeAll(() => buildServiceBundles(['settlement'], 'test'), 60_000);
  // Declared before the harness's: the children stop before the chain and the schema they use go.
  afterAll(async () => {
    for (const child of children) await stopChild(child);
  });
  // Settlement runs as a child process here; its schema is migrated up front so the test can read it.
  const h = useSettlementHarness('stlcrash', {
    start: false,
    overrides: { LOG_LEVEL: 'warn', TX_TIMEOUT_MS: '2000' },
  });

  const startChild = (crashPoint?: 'after_record' | 'after_broadcast'): ServiceProcess => {
    const child = spawnServiceBundle('settlement', 'test', {
      ...h.settlementEnv(),
      NODE_ENV: 'test',
      ...(crashPoint ? { SETTLEMENT_CRASH_POINT: crashPoint } : {}),
    });
    children.push(child);
    return child;
  };

  const stopChild = async (child: ServiceProcess) => {
    const timer = setTimeout(() => child.child.kill('SIGKILL'), 5000);
    await child.kill('SIGTERM');
    clearTimeout(timer);
  };

  const exitCodeOf = async (child: ServiceProcess, timeoutMs = 45_000) => {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<string>((resolve) => {
      timer = setTimeout(
        () => resolve(`no exit within ${timeoutMs} ms: ${child.output().slice(-4000)}`),
        timeoutMs,
      );
    });
    const code = await Promise.race([child.exited, timeout]);
    clearTimeout(timer);
    return code;
  };

  const transferOf = (kind: 'payout' | 'refund', key: string) =>
    h.db
      .selectFrom('outgoing_transfers')
      .selectAll()
      .where('kind', '=', kind)
      .where('idempotency_key', '=', key)
      .executeTakeFirst();

  it(
    'killed between recording and broadcasting: the restart broadcasts the recorded transaction once',
    async () => {
      await publishEvent(h.bus, refundInitiated('ref_after_record', '3', h.chain.anvil.chainId));
      const crashed = startChild('after_record');
      expect(await exitCodeOf(crashed)).toBe(137);

      const recorded = (await transferOf('refund', 'ref_after_record'))!;
      expect(recorded.status).toBe('signed');
      expect(recorded.raw_tx).toMatch(/^0x02/);
      expect(await h.chain.anvil.provider.getTransaction(recorded.tx_hash!)).toBeNull(); // never reached the chain
      expect(await h.chain.transfersFromEscrow()).toEqual([]);

      const restarted = startChild();
      await waitFor(async () => (await transferOf('refund', 'ref_after_record'))?.status === 'confirmed', {
        timeoutMs: 45_000,
        message: `refund not confirmed after restart: ${restarted.output()}`,
      });
      const confirmed = (await transferOf('refund', 'ref_after_record'))!;
      expect(confirmed.raw_tx).toBe(recorded.raw_tx); // the same bytes, never re-signed
      expect(await h.chain.transfersFromEscrow()).toEqual([
        { to: testWallets.buyer.address, amountMicro: 3_000_000n, txHash: recorded.tx_hash },
      ]);
      const completed = await waitFor(async () => {
        const events = await countStreamMessages(h.bus, 'refund.completed');
        return events.length > 0 && events;
      });
      expect(completed.map((e) => (e.data as { refundTxHash: string }).refundTxHash)).toEqual([
        recorded.tx_hash,
      ]);
      await stopChild(restarted);
    },
    SCENARIO_TIMEOUT_MS,
  );

  it(
    'killed between broadcasting and confirming: the restart confirms the one transaction',
    async () => {
      await setAutomine(h.chain.anvil.provider, false); // keep the broadcast transaction pending
      try {
        await publishEvent(h.bus, refundInitiated('ref_after_broadcast', '4', h.chain.anvil.chainId));
        const crashed = startChild('after_broadcast');
        expect(await exitCodeOf(crashed)).toBe(137);

        const recorded = (await transferOf('refund', 'ref_after_broadcast'))!;
        expect(recorded.status).toBe('signed'); // died before noting the broadcast
        expect(recorded.nonce).toBe(1n);
        expect(await h.chain.anvil.provider.getTransaction(recorded.tx_hash!)).not.toBeNull(); // in the mempool
        expect(await h.chain.anvil.provider.getTransactionReceipt(recorded.tx_hash!)).toBeNull();

        const restarted = startChild();
        // The restart rebroadcasts the same bytes (the node already knows them) and waits for a receipt.
        await waitFor(
          async () => (await transferOf('refund', 'ref_after_broadcast'))?.status === 'broadcast',
          {
            timeoutMs: 45_000,
            message: `not rebroadcast after restart: ${restarted.output()}`,
          },
        );
        await mine(h.chain.anvil.provider, 1);
        await waitFor(
          async () => (await transferOf('refund', 'ref_after_broadcast'))?.status === 'confirmed',
          {
            timeoutMs: 20_000,
          },
        );
        const toBuyer = (await h.chain.transfersFromEscrow()).filter((t) => t.amountMicro === 4_000_000n);
        expect(toBuyer).toEqual([
          { to: testWallets.buyer.address, amountMicro: 4_000_000n, txHash: recorded.tx_hash },
        ]);
        await stopChild(restarted);
      } finally {
        await setAutomine(h.chain.anvil.provider, true);
      }
    },
    SCENARIO_TIMEOUT_MS,
  );

  it(
    'a payout killed between recording and broadcasting is paid exactly once, and completed once',
    async () => {
      // A DAILY seller whose last settled period is long past: the first scheduler pass settles today.
      await h.db
        .insertInto('sellers')
        .values({
          seller_id: 'sel_crash',
          revision: 1,
          payout_address: testWallets.seller.address,
          settlement_frequency: 'DAILY',
          minimum_settlement_micro: 10_000_000n,
          last_scheduled_period: 'D:2000-01-01',
        })
        .execute();
      h.ledger.credit('sel_crash', '15.5');
      h.ledger.payoutAddresses.set('sel_crash', { revision: 1, address: testWallets.seller.address });
      const sellerBefore = await h.chain.balanceOf(testWallets.seller.address);

      const crashed = startChild('after_record');
      expect(await exitCodeOf(crashed)).toBe(137);
      const settlement = await h.db
        .selectFrom('settlements')
        .selectAll()
        .where('seller_id', '=', 'sel_crash')
        .executeTakeFirstOrThrow();
      expect(settlement.status).toBe('sending');
      const recorded = (await transferOf('payout', settlement.settlement_id))!;
      expect(recorded.status).toBe('signed');

      const restarted = startChild();
      await waitFor(
        async () =>
          (
            await h.db
              .selectFrom('settlements')
              .select('status')
              .where('settlement_id', '=', settlement.settlement_id)
              .executeTakeFirst()
          )?.status === 'completed',
        { timeoutMs: 45_000, message: `payout not completed after restart: ${restarted.output()}` },
      );
      expect(await h.chain.balanceOf(testWallets.seller.address)).toBe(sellerBefore + 15_500_000n);
      expect(
        (await h.chain.transfersFromEscrow()).filter((t) => t.to === testWallets.seller.address),
      ).toEqual([{ to: testWallets.seller.address, amountMicro: 15_500_000n, txHash: recorded.tx_hash }]);
      const completed = await waitFor(async () => {
        const events = await countStreamMessages(h.bus, 'settlement.completed');
        return events.length > 0 && events;
      });
      expect(completed).toHaveLength(1);
      expect(completed[0]!.data).toMatchObject({ settlementId: settlement.settlement_id, amount: '15.5' });
      // The ledger decided the settlement once; the restart recorded nothing more.
      expect(h.ledger.reservations.size).toBe(1);
      await stopChild(restarted);
    },
    SCENARIO_TIMEOUT_MS,
  );
});
