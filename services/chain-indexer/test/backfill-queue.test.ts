import { testWallets, waitFor } from '@paygate/testing';
import { Wallet } from 'ethers';
import { sql } from 'kysely';
import pg from 'pg';
import { type IndexerHarness, startIndexerHarness } from './harness';

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
  let h: IndexerHarness;
  let lock: pg.Client | undefined;

  beforeAll(async () => {
    h = await startIndexerHarness(
      'indexerbackfillqueue',
      { LEADER_RETRY_MS: '100', REORG_WINDOW_BLOCKS: '4', DEPOSIT_BACKFILL_BLOCKS: '4' },
      { stopped: true },
    );
    h.onStop(() => lock?.end().catch(() => undefined), 'after');
  });

  afterAll(() => h?.stop());

  it('finds a payment made while the address waited behind more than a batch of others', async () => {
    // The indexer has a cursor (it scanned up to a first payment), then stops leading: the test holds its lock, as
    // a replica that cannot reach the node would. Its consumer goes on registering addresses meanwhile.
    await h.startIndexer();
    await h.observedTransfer((await h.transfer(ESCROW, 1_000_000n)).hash);
    await h.stopIndexer();
    const { DATABASE_URL, DB_SCHEMA } = h.indexerEnv();
    lock = new pg.Client({ connectionString: DATABASE_URL });
    await lock.connect();
    const locked = await lock.query<{ ok: boolean }>(
      'select pg_try_advisory_lock(hashtextextended($1, 0)) as ok',
      [`chain-indexer:${DB_SCHEMA}:31337`],
    );
    expect(locked.rows[0]!.ok).toBe(true);
    await h.startIndexer();

    // The flood: a full batch of sessions assigned before the buyer's, then the buyer's own.
    const earlier = new Date(h.clock.nowMs() - 5_000);
    await Promise.all(
      Array.from({ length: BACKFILL_BATCH }, (_, i) =>
        h.assignDepositAddress(`0x${(0x1000 + i).toString(16).padStart(40, 'a')}`, 10_000 + i, {
          assignedAt: earlier,
        }),
      ),
    );
    const buyerDeposit = Wallet.createRandom().address;
    await h.assignDepositAddress(buyerDeposit, 1);
    await waitFor(
      async () => (await h.count(sql`select count(*)::int n from deposit_addresses`)) === BACKFILL_BATCH + 1,
      { message: 'every address registered' },
    );
    // The buyer pays while the scanner is paused, and the chain moves on well past DEPOSIT_BACKFILL_BLOCKS.
    const { hash: paid } = await h.transfer(buyerDeposit, 2_750_000n);
    await h.anvil.provider.send('anvil_mine', ['0x20']);

    // The scanner leads again: it works through the queue while its cursor moves to the head.
    await lock.end();
    lock = undefined;
    await waitFor(
      async () =>
        (await h.count(sql`select count(*)::int n from deposit_addresses where not backfilled`)) === 0,
      { message: 'every address backfilled' },
    );
    await h.observedTransfer((await h.transfer(ESCROW, 3_000_000n)).hash);
    await h.caughtUp();
    const [observed] = await h.events('transfer.observed', paid);
    expect(observed?.data).toMatchObject({ to: buyerDeposit, amount: '2.75' });
  });
});
