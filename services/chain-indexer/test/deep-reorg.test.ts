/**
 * A reorg deeper than the indexer's window of recent block hashes (REORG_WINDOW_BLOCKS): no stored hash is
 * canonical any more. Rolling back only the window left a reported transfer below it on the books although it
 * left the chain (the ledger above the chain for good). Real anvil, Postgres and NATS: the common ancestor is found
 * among older known blocks (the blocks of reported transfers), the dropped transfer is reported reorged, and the
 * operator is told by the metrics how deep it reached.
 */
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
  type TestEnvironment,
  testWallets,
  waitFor,
} from '@paygate/testing';
import { Contract, Wallet } from 'ethers';
import type { Kysely } from 'kysely';
import { loadConfig, startChainIndexer } from '../src';
import type { IndexerDatabase } from '../src/indexer/tables';
import { indexerCaughtUp } from './caught-up';

describe('a reorg deeper than REORG_WINDOW_BLOCKS', () => {
  let env: TestEnvironment;
  let anvil: AnvilInstance;
  let usdcAddress: string;
  let indexer: RunningService<IndexerDatabase>;
  let db: Kysely<any>;
  const WINDOW = 3;

  beforeAll(async () => {
    env = await createTestEnvironment('deepreorg');
    anvil = await startAnvil();
    ({ address: usdcAddress } = await deployTestUsdc(anvil.rpcUrl));
    await fundTestWallets({ rpcUrl: anvil.rpcUrl, usdcAddress, amountMicro: 1000_000_000n });
    indexer = await startChainIndexer(
      loadConfig(
        env.envFor('chain-indexer', {
          CHAIN_RPC_URL: anvil.rpcUrl,
          USDC_ADDRESS: usdcAddress,
          ESCROW_ADDRESS: testWallets.escrow.address,
          CONFIRMATIONS: '2',
          REORG_WINDOW_BLOCKS: String(WINDOW),
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
    await anvil?.stop();
    await env?.cleanup();
  });

  async function pay(amountMicro: bigint) {
    const usdc = new Contract(usdcAddress, usdcAbi, new Wallet(testWallets.buyer.privateKey, anvil.provider));
    const receipt = await minedReceipt(
      await usdc.getFunction('transfer')(testWallets.escrow.address, amountMicro),
    );
    return { txHash: receipt.hash.toLowerCase() as string, blockNumber: receipt.blockNumber as number };
  }
  const reported = async (subject: 'transfer.observed' | 'transfer.reorged', txHash: string) =>
    (await countStreamMessages(await env.bus(), subject)).filter(
      (e) => (e.data as { txHash: string }).txHash === txHash,
    ).length;
  const reorgsReaching = async (reach: string) =>
    (await indexer.ctx.metrics.registry.getSingleMetric('indexer_reorgs_total')?.get())?.values.find(
      (v) => v.labels.reach === reach,
    )?.value ?? 0;

  it('finds the common ancestor below the window and reports the dropped transfer reorged', async () => {
    const kept = await pay(1_000_000n);
    await mine(anvil.provider, 4);
    const dropped = await pay(2_000_000n);
    // Far more blocks on top than the stored hashes reach (the window, kept to twice it).
    await mine(anvil.provider, 4 * WINDOW);
    await indexerCaughtUp(indexer, db, anvil.provider);
    expect(await reported('transfer.observed', kept.txHash)).toBe(1);
    expect(await reported('transfer.observed', dropped.txHash)).toBe(1);

    const head = await anvil.provider.getBlockNumber();
    await reorg(anvil.provider, head - dropped.blockNumber + 1);
    expect(await anvil.provider.getTransactionReceipt(dropped.txHash)).toBeNull();
    await mine(anvil.provider, 1);
    await waitFor(async () => (await reported('transfer.reorged', dropped.txHash)) === 1, {
      message: 'the transfer below the window was never reported reorged',
      timeoutMs: 15_000,
    });
    await indexerCaughtUp(indexer, db, anvil.provider);
    expect(await reported('transfer.reorged', kept.txHash)).toBe(0);
    expect(await reported('transfer.observed', kept.txHash)).toBe(1); // not reported again
    expect(await reorgsReaching('past_window')).toBe(1);
    const deepest = (
      await indexer.ctx.metrics.registry.getSingleMetric('indexer_reorg_deepest_blocks')?.get()
    )?.values[0]?.value;
    expect(deepest).toBeGreaterThan(2 * WINDOW);
    const row = await db
      .selectFrom('transfers')
      .select('status')
      .where('tx_hash', '=', dropped.txHash)
      .executeTakeFirstOrThrow();
    expect(row.status).toBe('reorged');
  });
});
