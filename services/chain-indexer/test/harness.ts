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
 * otherwise. Stopping it stops the indexer, then the chain it reads, then the environment.
 */
export async function startIndexerHarness(
  label: string,
  extra: Record<string, string> = {},
  options: { fundMicro?: bigint } = {},
): Promise<IndexerHarness> {
  let anvil: AnvilInstance | undefined;
  let usdcAddress = '';
  const harness = await startServiceHarness(label, async ({ env, onStop }) => {
    const chain = await startAnvil();
    anvil = chain;
    onStop(() => chain.stop(), 'after');
    ({ address: usdcAddress } = await deployTestUsdc(chain.rpcUrl));
    await fundTestWallets({
      rpcUrl: chain.rpcUrl,
      usdcAddress,
      amountMicro: options.fundMicro ?? 100_000_000n,
    });
    return startChainIndexer(
      loadConfig(
        env.envFor('chain-indexer', {
          CHAIN_RPC_URL: chain.rpcUrl,
          USDC_ADDRESS: usdcAddress,
          ESCROW_ADDRESS: testWallets.escrow.address,
          CONFIRMATIONS: '1',
          POLL_INTERVAL_MS: '50',
          ...extra,
        }),
      ),
    );
  });
  const db = openSchema<IndexerDatabase>(harness.env.schemaFor('chain-indexer'));
  harness.onStop(() => db.destroy());
  return { ...harness, anvil: anvil!, usdcAddress, db };
}
