import { usdcAbi } from '@paygate/chain';
import type { EventData, EventEnvelope } from '@paygate/contracts';
import type { RunningService, StartedService } from '@paygate/runtime';
import {
  type AnvilInstance,
  countStreamMessages,
  deployTestUsdc,
  eventOf,
  fundTestWallets,
  minedReceipt,
  openSchema,
  publishEvent,
  type ServiceHarness,
  startAnvil,
  startServiceHarness,
  TestClock,
  type TestEnvironment,
  type TestWalletRole,
  testWallets,
  waitFor,
} from '@paygate/testing';
import { Contract, type TransactionReceipt, Wallet } from 'ethers';
import { type Kysely, type RawBuilder, sql } from 'kysely';
import { loadConfig, startChainIndexer } from '../src';
import type { IndexerDatabase } from '../src/indexer/tables';

const DAY_MS = 86_400_000;

type TransferSubject = 'transfer.observed' | 'transfer.reorged';
type TransferEvent<S extends TransferSubject> = EventEnvelope<S, EventData<S>>;

/** An RPC endpoint in front of the chain, such as a proxy injecting a fault. */
interface RpcEndpoint {
  url: string;
  close(): Promise<void>;
}

interface IndexerHarnessOptions<P extends RpcEndpoint | undefined> {
  /** USDC each test wallet is funded with; 100 USDC by default. */
  fundMicro?: bigint;
  /** The chain's options (`{ fresh: true }` for an anvil of its own that another can fork). */
  anvil?: Parameters<typeof startAnvil>[0];
  /** Started on the chain before the indexer, which reads through it; closed after the indexer stopped. */
  proxy?: (chain: AnvilInstance) => Promise<P>;
  /** The chain and environment only: the suite starts the indexer itself (`startIndexer`, or replicas of its own). */
  stopped?: boolean;
}

export interface IndexerHarness<P extends RpcEndpoint | undefined = undefined>
  extends Omit<ServiceHarness<StartedService>, 'service' | 'url'> {
  anvil: AnvilInstance;
  usdcAddress: string;
  proxy: P;
  /** The indexer's schema, for assertions on what it stored. */
  db: Kysely<IndexerDatabase>;
  /** The indexer running now (throws when the suite stopped it). */
  readonly indexer: RunningService<IndexerDatabase>;
  /** The indexer's environment: the suite's settings with `extra` on top. */
  indexerEnv(extra?: Record<string, string>): NodeJS.ProcessEnv;
  /** Stops the running indexer, if any, and starts one with `extra` on top of the suite's settings. */
  startIndexer(extra?: Record<string, string>): Promise<RunningService<IndexerDatabase>>;
  stopIndexer(): Promise<void>;
  /** A mined USDC transfer (another token's with `token`), from the buyer unless `from` says otherwise. */
  transfer(
    to: string,
    amountMicro: bigint,
    options?: { from?: TestWalletRole | Wallet; token?: string },
  ): Promise<TransactionReceipt>;
  /** The events of `subject` on the stream, those of `txHash` only when it is given. */
  events<S extends TransferSubject>(subject: S, txHash?: string): Promise<TransferEvent<S>[]>;
  /** The `n` a `select count(*)::int n ...` on the indexer's schema answers. */
  count(query: RawBuilder<{ n: number }>): Promise<number>;
  /** Waits for the transfer.observed of `txHash` and returns its data. */
  observedTransfer(txHash: string): Promise<EventData<'transfer.observed'>>;
  /**
   * The positive signal before asserting what was NOT published: a pass finished at the chain's current head (the
   * head gauge is set after the pass published what was due) and the relay sent everything it wrote.
   */
  caughtUp(): Promise<void>;
  /** Checkout's deposit.address_assigned of `address`, assigned now (the harness clock) and watched for a day. */
  assignDepositAddress(
    address: string,
    derivationIndex: number,
    options?: { assignedAt?: Date; watchForMs?: number },
  ): Promise<void>;
}

/**
 * A chain-indexer on the suite's own anvil (test USDC deployed, the test wallets funded), real Postgres and NATS,
 * watching the escrow wallet with one confirmation, a 50 ms poll and a 200 ms leader retry unless `extra` says
 * otherwise. Its clock ticks: the indexer and Postgres read real time, so the times the suite writes must too.
 * Stopping it stops the indexer, then the proxy and the chain it reads, then the environment.
 */
export async function startIndexerHarness<P extends RpcEndpoint | undefined = undefined>(
  label: string,
  extra: Record<string, string> = {},
  options: IndexerHarnessOptions<P> = {},
): Promise<IndexerHarness<P>> {
  let env: TestEnvironment | undefined;
  let anvil: AnvilInstance | undefined;
  let usdcAddress = '';
  let proxy: P | undefined;
  let running: RunningService<IndexerDatabase> | undefined;

  const indexerEnv = (more: Record<string, string> = {}) =>
    env!.envFor('chain-indexer', {
      CHAIN_RPC_URL: proxy?.url ?? anvil!.rpcUrl,
      USDC_ADDRESS: usdcAddress,
      ESCROW_ADDRESS: testWallets.escrow.address,
      CONFIRMATIONS: '1',
      POLL_INTERVAL_MS: '50',
      LEADER_RETRY_MS: '200',
      ...extra,
      ...more,
    });
  const stopIndexer = async () => {
    const stopping = running;
    running = undefined;
    await stopping?.stop();
  };
  const current = () => {
    if (!running) throw new Error(`${label}: no indexer running`);
    return running;
  };
  const startIndexer = async (more: Record<string, string> = {}) => {
    await stopIndexer();
    running = await startChainIndexer(loadConfig(indexerEnv(more)));
    return running;
  };

  const harness = await startServiceHarness(
    label,
    async (setup) => {
      env = setup.env;
      const chain = await startAnvil(options.anvil);
      anvil = chain;
      setup.onStop(() => chain.stop(), 'after');
      ({ address: usdcAddress } = await deployTestUsdc(chain.rpcUrl));
      await fundTestWallets({
        rpcUrl: chain.rpcUrl,
        usdcAddress,
        amountMicro: options.fundMicro ?? 100_000_000n,
      });
      if (options.proxy) {
        const endpoint = await options.proxy(chain);
        proxy = endpoint;
        setup.onStop(() => endpoint?.close(), 'after');
      }
      if (!options.stopped) await startIndexer();
      return {
        get url() {
          return running?.url ?? '';
        },
        stop: stopIndexer,
      };
    },
    { clock: new TestClock(Date.now(), { ticking: true }) },
  );
  const db = openSchema<IndexerDatabase>(harness.env.schemaFor('chain-indexer'));
  harness.onStop(() => db.destroy(), 'after');
  const chain = anvil!;

  const count = async (query: RawBuilder<{ n: number }>) => (await query.execute(db)).rows[0]!.n;
  const events = async <S extends TransferSubject>(subject: S, txHash?: string) =>
    ((await countStreamMessages(await harness.env.bus(), subject)) as TransferEvent<S>[]).filter(
      (e) => txHash === undefined || e.data.txHash === txHash,
    );
  return {
    env: harness.env,
    clock: harness.clock,
    onStop: harness.onStop,
    stop: harness.stop,
    anvil: chain,
    usdcAddress,
    proxy: proxy as P,
    db,
    get indexer() {
      return current();
    },
    indexerEnv,
    startIndexer,
    stopIndexer,
    async transfer(to, amountMicro, { from = 'buyer', token = usdcAddress } = {}) {
      const signer =
        typeof from === 'string'
          ? new Wallet(testWallets[from].privateKey, chain.provider)
          : from.connect(chain.provider);
      return minedReceipt(
        await new Contract(token, usdcAbi, signer).getFunction('transfer')(to, amountMicro),
      );
    },
    count,
    events,
    async observedTransfer(txHash) {
      const [event] = await waitFor(
        async () => {
          const found = await events('transfer.observed', txHash);
          return found.length > 0 ? found : undefined;
        },
        { message: `transfer ${txHash} published` },
      );
      return event!.data;
    },
    async caughtUp() {
      const head = await chain.provider.getBlockNumber();
      await waitFor(
        async () => {
          const gauge = await current().ctx.metrics.registry.getSingleMetric('indexer_head_block')?.get();
          const backlog = await count(sql`select count(*)::int n from outbox where published_at is null`);
          return (gauge?.values[0]?.value ?? -1) >= head && backlog === 0;
        },
        { message: `indexer never caught up with block ${head}` },
      );
    },
    async assignDepositAddress(
      address,
      derivationIndex,
      { assignedAt = harness.clock.now(), watchForMs = DAY_MS } = {},
    ) {
      const event = eventOf('deposit.address_assigned', {
        sessionId: `cs_${derivationIndex.toString(16).padStart(32, '0')}`,
        address,
        derivationIndex,
        chainId: chain.chainId,
        assignedAt: assignedAt.toISOString(),
        watchUntil: new Date(assignedAt.getTime() + watchForMs).toISOString(),
      });
      await publishEvent(await harness.env.bus(), event);
    },
  };
}
