import { mine, startAnvil, startRpcProxy, testWallets, waitFor } from '@paygate/testing';
import { type IndexerHarness, startIndexerHarness } from './harness';

/** A JSON-RPC endpoint that forwards to whichever node it is switched to (a load balancer changing its mind). */
async function startSwitchingProxy(initialUrl: string) {
  let upstreamUrl = initialUrl;
  const proxy = await startRpcProxy({ upstream: () => upstreamUrl });
  return {
    ...proxy,
    switchTo: (url: string) => {
      upstreamUrl = url;
    },
  };
}

/**
 * The chain goes A → B → A: the indexer's node shows a block holding a payment, then (switched to another node) a
 * fork without it, then the first chain again, longer. The payment's block comes back with its old hash, so the
 * transfer the indexer reversed is the same row, revived and published again (b859704 drove this on Postgres
 * alone; here two real anvils behind a switching proxy make it, the second forked from the first below the block).
 */
describe('chain-indexer: a block reorged away and back with the same hash', () => {
  let h: IndexerHarness<Awaited<ReturnType<typeof startSwitchingProxy>>>;

  beforeAll(async () => {
    h = await startIndexerHarness(
      'indexer-reorg-back',
      { CONFIRMATIONS: '2' },
      { anvil: { fresh: true }, fundMicro: 10_000_000n, proxy: (chain) => startSwitchingProxy(chain.rpcUrl) },
    );
  });

  afterAll(() => h?.stop());

  const eventsOf = async (subject: 'transfer.observed' | 'transfer.reorged', txHash: string) =>
    (await h.events(subject, txHash)).map((e) => e.data);

  it('publishes transfer.reorged when the block leaves, and transfer.observed again when it comes back', async () => {
    const chainA = h.anvil;
    const forkPoint = await chainA.provider.getBlockNumber();
    const receipt = await h.transfer(testWallets.escrow.address, 1_500_000n);
    const txHash = receipt.hash;
    await mine(chainA.provider, 2);
    const [first] = await waitFor(
      async () => {
        const observed = await eventsOf('transfer.observed', txHash);
        return observed.length > 0 ? observed : undefined;
      },
      { message: 'the payment on chain A was never observed' },
    );
    expect(first!.blockHash).toBe(receipt.blockHash);

    // Chain B: forked from A below the payment's block, longer, without the payment.
    const chainB = await startAnvil({
      extraArgs: ['--fork-url', chainA.rpcUrl, '--fork-block-number', String(forkPoint)],
    });
    h.onStop(() => chainB.stop(), 'after');
    await mine(chainB.provider, 5);
    expect((await chainB.provider.getBlock(forkPoint))!.hash).toBe(
      (await chainA.provider.getBlock(forkPoint))!.hash,
    );
    h.proxy.switchTo(chainB.rpcUrl);
    const [reorged] = await waitFor(
      async () => {
        const found = await eventsOf('transfer.reorged', txHash);
        return found.length > 0 ? found : undefined;
      },
      { message: 'the payment was never reported reorged on chain B' },
    );
    expect(reorged!.blockHash).toBe(receipt.blockHash);

    // Back to chain A, now the longer one: the payment's block, with its old hash, is canonical again.
    await mine(chainA.provider, 6);
    h.proxy.switchTo(chainA.rpcUrl);
    const observed = await waitFor(
      async () => {
        const found = await eventsOf('transfer.observed', txHash);
        return found.length === 2 ? found : undefined;
      },
      { message: 'the payment back on chain A was never observed again' },
    );
    expect(observed.map((o) => o.blockHash)).toEqual([receipt.blockHash, receipt.blockHash]);
    expect(await eventsOf('transfer.reorged', txHash)).toHaveLength(1);
  });
});
