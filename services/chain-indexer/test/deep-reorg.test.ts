/**
 * A reorg deeper than the indexer's window of recent block hashes (REORG_WINDOW_BLOCKS): no stored hash is
 * canonical any more. Rolling back only the window left a reported transfer below it on the books although it
 * left the chain (the ledger above the chain for good). Real anvil, Postgres and NATS: the common ancestor is found
 * among older known blocks (the blocks of reported transfers), the dropped transfer is reported reorged, and the
 * operator is told by the metrics how deep it reached.
 */
import { mine, reorg, testWallets, waitFor } from '@paygate/testing';
import { type IndexerHarness, startIndexerHarness } from './harness';

describe('a reorg deeper than REORG_WINDOW_BLOCKS', () => {
  let h: IndexerHarness;
  const WINDOW = 3;

  beforeAll(async () => {
    h = await startIndexerHarness(
      'deepreorg',
      { CONFIRMATIONS: '2', REORG_WINDOW_BLOCKS: String(WINDOW) },
      { fundMicro: 1000_000_000n },
    );
  });

  afterAll(() => h?.stop());

  const pay = (amountMicro: bigint) => h.transfer(testWallets.escrow.address, amountMicro);
  const reported = async (subject: 'transfer.observed' | 'transfer.reorged', txHash: string) =>
    (await h.events(subject, txHash)).length;
  const metric = async (name: string) =>
    (await h.indexer.ctx.metrics.registry.getSingleMetric(name)?.get())?.values;

  it('finds the common ancestor below the window and reports the dropped transfer reorged', async () => {
    const kept = await pay(1_000_000n);
    await mine(h.anvil.provider, 4);
    const dropped = await pay(2_000_000n);
    // Far more blocks on top than the stored hashes reach (the window, kept to twice it).
    await mine(h.anvil.provider, 4 * WINDOW);
    await h.caughtUp();
    expect(await reported('transfer.observed', kept.hash)).toBe(1);
    expect(await reported('transfer.observed', dropped.hash)).toBe(1);

    const head = await h.anvil.provider.getBlockNumber();
    await reorg(h.anvil.provider, head - dropped.blockNumber + 1);
    expect(await h.anvil.provider.getTransactionReceipt(dropped.hash)).toBeNull();
    await mine(h.anvil.provider, 1);
    await waitFor(async () => (await reported('transfer.reorged', dropped.hash)) === 1, {
      message: 'the transfer below the window was never reported reorged',
      timeoutMs: 15_000,
    });
    await h.caughtUp();
    expect(await reported('transfer.reorged', kept.hash)).toBe(0);
    expect(await reported('transfer.observed', kept.hash)).toBe(1); // not reported again
    expect(
      (await metric('indexer_reorgs_total'))?.find((v) => v.labels.reach === 'past_window')?.value ?? 0,
    ).toBe(1);
    expect((await metric('indexer_reorg_deepest_blocks'))?.[0]?.value).toBeGreaterThan(2 * WINDOW);
    const row = await h.db
      .selectFrom('transfers')
      .select('status')
      .where('tx_hash', '=', dropped.hash)
      .executeTakeFirstOrThrow();
    expect(row.status).toBe('reorged');
  });
});
