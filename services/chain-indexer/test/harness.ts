import type { RunningService } from '@paygate/runtime';
import {
  type AnvilInstance,
  deployTestUsdc,
  fundTestWallets,
  openSchema,
  type ServiceHarness,
  startAnvil,
  startServiceHarness,
  testWallets,
} from '@paygate/testing';
import type { Kysely } from 'kysely';
import { loadConfig, startChainIndexer } from '../src';
import type { IndexerDatabase } from '../src/indexer/tables';

export interface IndexerHarness extends ServiceHarness<RunningService<IndexerDatabase>> {
  anvil: AnvilInstance;
  usdcAddress: string;
  /** The indexer's schema, for assertions on what it stored. */
  db: Kysely<IndexerDatabase>;
}

/**
 * A chain-indexer on the suite's own anvil (test USDC deployed, the test wallets funded with `fundMicro` each),
 * real Postgres and NATS, watching the escrow wallet with one confirmation and a 50 ms poll unless `extra` says
 * otherwise. Stopping it stops the indexer, then the chain, then the environment.
 */
export async function startIndexerHarness(
  label: string,
  extra: Record<string, string> = {},
  options: { fundMicro?: bigint } = {},
): Promise<IndexerHarness> {
  const anvil = await startAnvil();
  let usdcAddress = '';
  try {
    ({ address: usdcAddress } = await deployTestUsdc(anvil.rpcUrl));
    await fundTestWallets({
      rpcUrl: anvil.rpcUrl,
      usdcAddress,
      amountMicro: options.fundMicro ?? 100_000_000n,
    });
  } catch (error) {
    await anvil.stop();
    throw error;
  }
  const harness = await startServiceHarness(label, ({ env }) =>
    startChainIndexer(
      loadConfig(
        env.envFor('chain-indexer', {
          CHAIN_RPC_URL: anvil.rpcUrl,
          USDC_ADDRESS: usdcAddress,
          ESCROW_ADDRESS: testWallets.escrow.address,
          CONFIRMATIONS: '1',
          POLL_INTERVAL_MS: '50',
          ...extra,
        }),
      ),
    ),
  ).catch(async (error) => {
    await anvil.stop();
    throw error;
  });
  const db = openSchema<IndexerDatabase>(harness.env.schemaFor('chain-indexer'));
  harness.onStop(() => db.destroy());
  harness.onStop(() => anvil.stop(), 'after');
  return { ...harness, anvil, usdcAddress, db };
}
