import { mine, reorg, startRpcProxy, testWallets, waitFor } from '@paygate/testing';
import { type IndexerHarness, startIndexerHarness } from './harness';

const USDC = 1_000_000n;

/**
 * A pass-through JSON-RPC endpoint in front of anvil that, once armed, runs one `anvil_reorg` on anvil right
 * before it forwards the next `eth_getLogs`: the reorg then lands inside an indexer pass, after its reorg check
 * compared the stored hashes with the chain and before the scan reads the new block's hash.
 */
async function startReorgTrap(upstreamUrl: string, onTrigger: () => Promise<void>) {
  let armed = false;
  let fired = 0;
  /**
   * Blocks the latest block (eth_blockNumber, eth_getBlockByNumber "latest") answers behind anvil (a load-balanced
   * node lagging), and how often it did.
   */
  let lagBlocks = 0;
  let laggedAnswers = 0;
  const lagged = (block: unknown) => `0x${(BigInt(block as string) - BigInt(lagBlocks)).toString(16)}`;
  const proxy = await startRpcProxy({
    upstream: upstreamUrl,
    answer: async (call, forward) => {
      if (armed && call.method === 'eth_getLogs') {
        armed = false;
        await onTrigger();
        fired++;
      }
      if (lagBlocks > 0 && call.method === 'eth_getBlockByNumber' && call.params?.[0] === 'latest') {
        const head = await forward({ jsonrpc: '2.0', id: 1, method: 'eth_blockNumber', params: [] });
        laggedAnswers++;
        return forward({ ...call, params: [lagged(head.result), ...call.params.slice(1)] });
      }
      if (lagBlocks > 0 && call.method === 'eth_blockNumber') {
        const reply = await forward(call);
        if (lagBlocks === 0 || reply.result === undefined) return reply;
        laggedAnswers++;
        return { ...reply, result: lagged(reply.result) };
      }
      return undefined;
    },
  });
  return {
    url: proxy.url,
    arm: () => {
      armed = true;
    },
    fired: () => fired,
    lag: (blocks: number) => {
      lagBlocks = blocks;
    },
    laggedAnswers: () => laggedAnswers,
    close: proxy.close,
  };
}

describe('chain-indexer: a reorg between the reorg check and the scan of the next block', () => {
  let h: IndexerHarness<Awaited<ReturnType<typeof startReorgTrap>>>;

  /** The buyer pays escrow `amountMicro` USDC; the mined transaction's hash. */
  const payEscrow = async (amountMicro: bigint) =>
    (await h.transfer(testWallets.escrow.address, amountMicro)).hash;

  beforeAll(async () => {
    h = await startIndexerHarness(
      'indexer-race',
      { CONFIRMATIONS: '3' },
      // Depth 2 replaces the transfer's block and the one the indexer is scanning, with empty blocks.
      { proxy: (chain) => startReorgTrap(chain.rpcUrl, () => reorg(chain.provider, 2)) },
    );
  });

  afterAll(() => h?.stop());

  it('never publishes transfer.observed for a transfer whose block was replaced, or reverses it', async () => {
    const txHash = await payEscrow(7n * USDC);
    // The indexer holds the transfer as pending (one confirmation of three) and its block's hash.
    await h.caughtUp();
    const pending = await h.db.selectFrom('transfers').selectAll().where('tx_hash', '=', txHash).execute();
    expect(pending.map((row) => row.status)).toEqual(['pending']);

    h.proxy.arm();
    await mine(h.anvil.provider, 1);
    await waitFor(async () => h.proxy.fired() === 1, { message: 'the scan of the next block never ran' });
    expect(await h.anvil.provider.getTransactionReceipt(txHash)).toBeNull();
    // Past the confirmations the transfer would have had in its old block.
    await mine(h.anvil.provider, 4);
    await h.caughtUp();

    const observed = await h.events('transfer.observed', txHash);
    const reorged = await h.events('transfer.reorged', txHash);
    // Before the fix: the block scanned after the reorg matched the chain, so the check never looked below it;
    // the transfer of the replaced block stayed pending and was published (observed 1, reorged 0).
    expect(observed.length).toBe(reorged.length);
    const rows = await h.db.selectFrom('transfers').selectAll().where('tx_hash', '=', txHash).execute();
    expect(rows.filter((row) => row.status === 'pending' || row.status === 'published')).toEqual([]);
  });

  it('does not take a node answering a head behind what it saw for a reorg: nothing is reversed', async () => {
    const txHash = await payEscrow(3n * USDC);
    await mine(h.anvil.provider, 3);
    await h.caughtUp();
    const published = async () =>
      (await h.db.selectFrom('transfers').select('status').where('tx_hash', '=', txHash).execute()).map(
        (row) => row.status,
      );
    expect(await published()).toEqual(['published']);

    // The node answers a head 5 blocks back (below the transfer's block) for a few passes.
    const before = h.proxy.laggedAnswers();
    h.proxy.lag(5);
    try {
      await waitFor(async () => h.proxy.laggedAnswers() >= before + 3, {
        message: 'no pass read the lagging head',
      });
    } finally {
      h.proxy.lag(0);
    }
    await mine(h.anvil.provider, 1);
    await h.caughtUp();
    const reorged = await h.events('transfer.reorged', txHash);
    // Before: the stored blocks above the lagging head were taken for gone, the transfer was reversed (and, its
    // block coming back with the same hash, never published again).
    expect(reorged).toEqual([]);
    expect(await published()).toEqual(['published']);
  });
});
