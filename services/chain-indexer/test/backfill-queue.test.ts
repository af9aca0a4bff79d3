import { encodeEnvelope } from '@paygate/bus';
import { usdcAbi } from '@paygate/chain';
import { createEvent } from '@paygate/contracts';
import type { RunningService } from '@paygate/runtime';
import {
  type AnvilInstance,
  countStreamMessages,
  createTestEnvironment,
  deployTestUsdc,
  fundTestWallets,
  minedReceipt,
  openSchema,
  startAnvil,
  type TestEnvironment,
  testWallets,
  waitFor,
} from '@paygate/testing';
import { Contract, Wallet } from 'ethers';
import { type Kysely, sql } from 'kysely';
import pg from 'pg';
import { loadConfig, startChainIndexer } from '../src';
import type { IndexerDatabase } from '../src/indexer/tables';
import { indexerCaughtUp } from './caught-up';

const ESCROW = testWallets.escrow.address;
/** The scanner backfills this many newly heard-of deposit addresses a pass (BACKFILL_BATCH in scanner.ts). */
const BACKFILL_BATCH = 500;

/**
 * A deposit address is watched only once it is backfilled, and the scanner backfills a bounded batch a pass while
 * its cursor moves on. A flood of sessions from free accounts fills the queue ahead of a buyer's address; when the
 * scanner was paused (an RPC outage, a leader change) the cursor then passes the buyer's payment before the
 * buyer's address leaves the queue. Its backfill must reach back to where the indexer was when it heard of the
 * address, not only DEPOSIT_BACKFILL_BLOCKS below the cursor of the pass that finally backfills it.
 */
describe('chain-indexer: a deposit address waiting behind a flood in the backfill queue', () => {
  let env: TestEnvironment;
  let anvil: AnvilInstance;
  let usdcAddress: string;
  let indexer: RunningService<IndexerDatabase> | undefined;
  let db: Kysely<any>;
  let lock: pg.Client | undefined;

  const start = () =>
    startChainIndexer(
      loadConfig(
        env.envFor('chain-indexer', {
          CHAIN_RPC_URL: anvil.rpcUrl,
          USDC_ADDRESS: usdcAddress,
          ESCROW_ADDRESS: ESCROW,
          CONFIRMATIONS: '1',
          POLL_INTERVAL_MS: '50',
          LEADER_RETRY_MS: '100',
          REORG_WINDOW_BLOCKS: '4',
          DEPOSIT_BACKFILL_BLOCKS: '4',
        }),
      ),
    );
  const pay = async (to: string, amountMicro: bigint) => {
    const buyer = new Wallet(testWallets.buyer.privateKey, anvil.provider);
    const tx = await new Contract(usdcAddress, usdcAbi, buyer).getFunction('transfer')(to, amountMicro);
    await minedReceipt(tx);
    return (tx.hash as string).toLowerCase();
  };
  const assign = async (address: string, index: number, assignedAt: Date) => {
    const bus = await env.bus();
    const event = createEvent('deposit.address_assigned', 'checkout', {
      sessionId: `cs_${index.toString(16).padStart(32, '0')}`,
      address,
      derivationIndex: index,
      chainId: 31337,
      assignedAt: assignedAt.toISOString(),
      watchUntil: new Date(assignedAt.getTime() + 86_400_000).toISOString(),
    });
    await bus.js.publish(bus.subjectFor('deposit.address_assigned'), encodeEnvelope(event), {
      msgID: event.id,
    });
  };
  const publishedTxHashes = async () =>
    (await countStreamMessages(await env.bus(), 'transfer.observed')).map((e) => (e.data as any).txHash);

  beforeAll(async () => {
    env = await createTestEnvironment('indexerbackfillqueue');
    anvil = await startAnvil();
    ({ address: usdcAddress } = await deployTestUsdc(anvil.rpcUrl));
    await fundTestWallets({ rpcUrl: anvil.rpcUrl, usdcAddress, amountMicro: 100_000_000n });
    db = openSchema(env.schemaFor('chain-indexer'));
  });

  afterAll(async () => {
    await indexer?.stop();
    await lock?.end().catch(() => undefined);
    await db?.destroy();
    await anvil?.stop();
    await env?.cleanup();
  });

  it('finds a payment made while the address waited behind more than a batch of others', async () => {
    // The indexer has a cursor (it scanned up to a first payment), then stops leading: the test holds its lock, as
    // a replica that cannot reach the node would. Its consumer goes on registering addresses meanwhile.
    indexer = await start();
    const first = await pay(ESCROW, 1_000_000n);
    await waitFor(async () => (await publishedTxHashes()).includes(first), {
      message: 'first payment published',
    });
    await indexer.stop();
    const envFor = env.envFor('chain-indexer', {});
    lock = new pg.Client({ connectionString: envFor.DATABASE_URL });
    await lock.connect();
    const locked = await lock.query<{ ok: boolean }>(
      'select pg_try_advisory_lock(hashtextextended($1, 0)) as ok',
      [`chain-indexer:${envFor.DB_SCHEMA}:31337`],
    );
    expect(locked.rows[0]!.ok).toBe(true);
    indexer = await start();

    // The flood: a full batch of sessions assigned before the buyer's, then the buyer's own.
    const earlier = new Date(Date.now() - 5_000);
    await Promise.all(
      Array.from({ length: BACKFILL_BATCH }, (_, i) =>
        assign(`0x${(0x1000 + i).toString(16).padStart(40, 'a')}`, 10_000 + i, earlier),
      ),
    );
    const buyerDeposit = Wallet.createRandom().address;
    await assign(buyerDeposit, 1, new Date());
    await waitFor(
      async () =>
        (await sql<{ n: number }>`select count(*)::int n from deposit_addresses`.execute(db)).rows[0]!.n ===
        BACKFILL_BATCH + 1,
      { message: 'every address registered' },
    );
    // The buyer pays while the scanner is paused, and the chain moves on well past DEPOSIT_BACKFILL_BLOCKS.
    const paid = await pay(buyerDeposit, 2_750_000n);
    await anvil.provider.send('anvil_mine', ['0x20']);

    // The scanner leads again: it works through the queue while its cursor moves to the head.
    await lock.end();
    lock = undefined;
    await waitFor(
      async () =>
        (
          await sql<{
            n: number;
          }>`select count(*)::int n from deposit_addresses where not backfilled`.execute(db)
        ).rows[0]!.n === 0,
      { message: 'every address backfilled' },
    );
    const marker = await pay(ESCROW, 3_000_000n);
    await waitFor(async () => (await publishedTxHashes()).includes(marker), { message: 'marker published' });
    await indexerCaughtUp(indexer, db, anvil.provider);
    const observed = (await countStreamMessages(await env.bus(), 'transfer.observed')).find(
      (e) => (e.data as any).txHash === paid,
    );
    expect(observed?.data).toMatchObject({ to: buyerDeposit, amount: '2.75' });
  });
});
