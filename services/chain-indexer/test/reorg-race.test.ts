import { usdcAbi } from '@paygate/chain';
import type { RunningService } from '@paygate/runtime';
import {
  type AnvilInstance,
  countStreamMessages,
  createTestEnvironment,
  deployTestUsdc,
  fundTestWallets,
  mine,
  minedReceipt,
  openSchema,
  reorg,
  startAnvil,
  startRpcProxy,
  type TestEnvironment,
  testWallets,
  waitFor,
} from '@paygate/testing';
import { Contract, Wallet } from 'ethers';
import type { Kysely } from 'kysely';
import { loadConfig, startChainIndexer } from '../src';
import type { IndexerDatabase } from '../src/indexer/tables';
import { indexerCaughtUp } from './caught-up';

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
  let env: TestEnvironment;
  let anvil: AnvilInstance;
  let usdcAddress: string;
  let trap: Awaited<ReturnType<typeof startReorgTrap>>;
  let indexer: RunningService<IndexerDatabase> | undefined;
  let db: Kysely<any>;

  const caughtUp = () => indexerCaughtUp(indexer!, db, anvil.provider);

  /** The buyer pays escrow `amountMicro` USDC; the mined transaction's hash. */
  async function payEscrow(amountMicro: bigint): Promise<string> {
    const buyer = new Wallet(testWallets.buyer.privateKey, anvil.provider);
    const tx = await new Contract(usdcAddress, usdcAbi, buyer).getFunction('transfer')(
      testWallets.escrow.address,
      amountMicro,
    );
    await minedReceipt(tx);
    return tx.hash as string;
  }

  beforeAll(async () => {
    env = await createTestEnvironment('indexer-race');
    anvil = await startAnvil();
    ({ address: usdcAddress } = await deployTestUsdc(anvil.rpcUrl));
    await fundTestWallets({ rpcUrl: anvil.rpcUrl, usdcAddress, amountMicro: 100n * USDC });
    // Depth 2 replaces the transfer's block and the one the indexer is scanning, with empty blocks.
    trap = await startReorgTrap(anvil.rpcUrl, () => reorg(anvil.provider, 2));
    indexer = await startChainIndexer(
      loadConfig(
        env.envFor('chain-indexer', {
          CHAIN_RPC_URL: trap.url,
          USDC_ADDRESS: usdcAddress,
          ESCROW_ADDRESS: testWallets.escrow.address,
          CONFIRMATIONS: '3',
          POLL_INTERVAL_MS: '50',
          LEADER_RETRY_MS: '200',
        }),
      ),
    );
    db = openSchema(env.schemaFor('chain-indexer'));
  });

  afterAll(async () => {
    await indexer?.stop();
    await db?.destroy();
    await trap?.close();
    await anvil?.stop();
    await env?.cleanup();
  });

  it('never publishes transfer.observed for a transfer whose block was replaced, or reverses it', async () => {
    const txHash = await payEscrow(7n * USDC);
    // The indexer holds the transfer as pending (one confirmation of three) and its block's hash.
    await caughtUp();
    const pending = await db.selectFrom('transfers').selectAll().where('tx_hash', '=', txHash).execute();
    expect(pending.map((row) => row.status)).toEqual(['pending']);

    trap.arm();
    await mine(anvil.provider, 1);
    await waitFor(async () => trap.fired() === 1, { message: 'the scan of the next block never ran' });
    expect(await anvil.provider.getTransactionReceipt(txHash)).toBeNull();
    // Past the confirmations the transfer would have had in its old block.
    await mine(anvil.provider, 4);
    await caughtUp();

    const bus = await env.bus();
    const ofTx = (events: Array<{ data: unknown }>) =>
      events.filter((e) => (e.data as { txHash: string }).txHash === txHash);
    const observed = ofTx(await countStreamMessages(bus, 'transfer.observed'));
    const reorged = ofTx(await countStreamMessages(bus, 'transfer.reorged'));
    // Before the fix: the block scanned after the reorg matched the chain, so the check never looked below it;
    // the transfer of the replaced block stayed pending and was published (observed 1, reorged 0).
    expect(observed.length).toBe(reorged.length);
    const rows = await db.selectFrom('transfers').selectAll().where('tx_hash', '=', txHash).execute();
    expect(rows.filter((row) => row.status === 'pending' || row.status === 'published')).toEqual([]);
  });

  it('does not take a node answering a head behind what it saw for a reorg: nothing is reversed', async () => {
    const txHash = await payEscrow(3n * USDC);
    await mine(anvil.provider, 3);
    await caughtUp();
    const published = async () =>
      (await db.selectFrom('transfers').select('status').where('tx_hash', '=', txHash).execute()).map(
        (row) => row.status,
      );
    expect(await published()).toEqual(['published']);

    // The node answers a head 5 blocks back (below the transfer's block) for a few passes.
    const before = trap.laggedAnswers();
    trap.lag(5);
    try {
      await waitFor(async () => trap.laggedAnswers() >= before + 3, {
        message: 'no pass read the lagging head',
      });
    } finally {
      trap.lag(0);
    }
    await mine(anvil.provider, 1);
    await caughtUp();
    const bus = await env.bus();
    const reorged = (await countStreamMessages(bus, 'transfer.reorged')).filter(
      (e) => (e.data as { txHash: string }).txHash === txHash,
    );
    // Before: the stored blocks above the lagging head were taken for gone, the transfer was reversed (and, its
    // block coming back with the same hash, never published again).
    expect(reorged).toEqual([]);
    expect(await published()).toEqual(['published']);
  });
});
