import { InboxConsumer } from '@paygate/bus';
import {
  deployTestUsdc,
  fundTestWallets,
  mine,
  publishEvent,
  reorg,
  type ServiceProcess,
  startServiceHarness,
  testWallets,
  waitFor,
} from '@paygate/testing';
import { buildServiceBundles, spawnServiceBundle } from '@paygate/testing/service-bundles';
import { sql } from 'kysely';
import { loadConfig, startChainIndexer } from '../src';
import { insertTransfers } from '../src/indexer/scanner';
import { type IndexerHarness, startIndexerHarness } from './harness';

const USDC = 1_000_000n;

describe('chain-indexer on anvil: transfer.observed exactly once', () => {
  let h: IndexerHarness;

  const pay = async (to: string, amountMicro: bigint, token?: string) =>
    (await h.transfer(to, amountMicro, { token })).hash;
  const observed = () => h.events('transfer.observed');

  beforeAll(async () => {
    h = await startIndexerHarness('indexer', { CONFIRMATIONS: '2' }, { fundMicro: 1000n * USDC });
  });

  afterAll(() => h?.stop());

  it('publishes one event per transfer once it has the confirmations, with every field', async () => {
    const txHash = await pay(testWallets.escrow.address, 1_500_000n);
    await h.caughtUp();
    expect(await observed()).toHaveLength(0); // one confirmation so far, two required
    await mine(h.anvil.provider, 1);
    const events = await waitFor(async () => {
      const all = await observed();
      return all.length === 1 ? all : undefined;
    });
    const receipt = await h.anvil.provider.getTransactionReceipt(txHash);
    expect(events[0]).toMatchObject({
      type: 'transfer.observed',
      producer: 'chain-indexer',
      data: {
        chainId: 31337,
        network: 'local',
        txHash,
        logIndex: 0,
        blockNumber: receipt!.blockNumber,
        blockHash: receipt!.blockHash,
        from: testWallets.buyer.address,
        to: testWallets.escrow.address,
        token: h.usdcAddress,
        amount: '1.5',
        confirmations: 2,
      },
    });
    await mine(h.anvil.provider, 3);
    await h.caughtUp();
    expect(await observed()).toHaveLength(1);
  });

  it('ignores transfers to another address and transfers of another token', async () => {
    const before = (await observed()).length;
    const { address: otherToken } = await deployTestUsdc(h.anvil.rpcUrl);
    await fundTestWallets({ rpcUrl: h.anvil.rpcUrl, usdcAddress: otherToken, amountMicro: 10n * USDC });
    await pay(testWallets.stranger.address, 2n * USDC);
    await pay(testWallets.escrow.address, 3n * USDC, otherToken);
    await mine(h.anvil.provider, 3);
    await h.caughtUp();
    expect(await observed()).toHaveLength(before);
  });

  it('is never ready on an RPC of another chain than CHAIN_NETWORK, and /readyz names both chain ids', async () => {
    const wrongChain = await startServiceHarness('indexerwrongchain', ({ env }) =>
      startChainIndexer(
        loadConfig(
          env.envFor('chain-indexer', {
            CHAIN_RPC_URL: h.anvil.rpcUrl,
            CHAIN_NETWORK: 'base-sepolia',
            ESCROW_ADDRESS: testWallets.escrow.address,
          }),
        ),
      ),
    );
    try {
      const answer = await fetch(`${wrongChain.url}/readyz`);
      expect(answer.status).toBe(503);
      expect(
        ((await answer.json()) as { error: { checks: Record<string, string> } }).error.checks.chain,
      ).toBe(
        'CHAIN_RPC_URL serves chain id 31337, but CHAIN_NETWORK is chain id 84532: point it at an RPC of that chain',
      );
      // The same RPC under its own chain's name: ready.
      expect((await fetch(`${h.indexer.url}/readyz`)).status).toBe(200);
    } finally {
      await wrongChain.stop();
    }
  });

  it('resumes after a restart with no gap and no duplicate', async () => {
    const before = (await observed()).length;
    await h.stopIndexer();
    const whileDown = [
      await pay(testWallets.escrow.address, 4n * USDC),
      await pay(testWallets.escrow.address, 5n * USDC),
    ];
    await mine(h.anvil.provider, 2);
    await h.startIndexer();
    const events = await waitFor(async () => {
      const all = await observed();
      return all.length === before + 2 ? all : undefined;
    });
    expect(events.slice(before).map((e) => e.data.txHash)).toEqual(whileDown);
    await mine(h.anvil.provider, 2);
    await h.caughtUp();
    expect(await observed()).toHaveLength(before + 2);
  });

  it('publishes transfer.reorged when a reorg removes a published transfer', async () => {
    const txHash = await pay(testWallets.escrow.address, 6n * USDC);
    await mine(h.anvil.provider, 1);
    await h.observedTransfer(txHash);
    // Replace the last 3 blocks (the transfer's and two after it) with empty ones.
    await reorg(h.anvil.provider, 3);
    const reorged = await waitFor(async () => {
      const all = await h.events('transfer.reorged');
      return all.length === 1 ? all : undefined;
    });
    expect(reorged[0]!.data).toMatchObject({ txHash, amount: '6' });
    expect(await h.anvil.provider.getTransactionReceipt(txHash)).toBeNull();
    const row = await h.db
      .selectFrom('transfers')
      .selectAll()
      .where('tx_hash', '=', txHash)
      .executeTakeFirstOrThrow();
    expect(row.status).toBe('reorged');
  });

  it('a transfer seen again in a block that comes back with the same hash (A, B, then A again) is published again', async () => {
    // anvil cannot bring back a replaced block with its old hash (a snapshot does not outlive anvil_reorg), so the
    // scanner's insert is driven here on rows of a chain id no running indexer scans. Before, the insert met the
    // reorged row and did nothing: the transfer stayed reversed while its money sat in escrow.
    const row = (status: 'reorged' | 'published', txHash: string) => ({
      chain_id: 999_001,
      block_hash: `0x${'a'.repeat(64)}`,
      block_number: 10n,
      tx_hash: txHash,
      log_index: 0,
      token: h.usdcAddress.toLowerCase(),
      from_address: testWallets.buyer.address.toLowerCase(),
      to_address: testWallets.escrow.address.toLowerCase(),
      amount_micro: 7n * USDC,
      status,
      published_at: new Date(),
      reorged_at: status === 'reorged' ? new Date() : null,
    });
    const reversed = row('reorged', `0x${'1'.repeat(64)}`);
    const live = row('published', `0x${'2'.repeat(64)}`);
    await h.db.insertInto('transfers').values([reversed, live]).execute();
    await h.db.transaction().execute((trx) =>
      insertTransfers(trx, [
        { ...reversed, status: 'pending', published_at: null, reorged_at: null },
        { ...live, status: 'pending', published_at: null, reorged_at: null },
      ]),
    );
    const after = await h.db
      .selectFrom('transfers')
      .select(['tx_hash', 'status', 'published_at', 'reorged_at'])
      .where('chain_id', '=', 999_001)
      .orderBy('tx_hash')
      .execute();
    expect(after).toEqual([
      { tx_hash: reversed.tx_hash, status: 'pending', published_at: null, reorged_at: null },
      { tx_hash: live.tx_hash, status: 'published', published_at: expect.any(Date), reorged_at: null },
    ]);
  });

  it('a redelivered transfer.observed is ignored by an inbox consumer', async () => {
    const bus = await h.env.bus();
    const [first] = await observed();
    const effects: string[] = [];
    const consumer = new InboxConsumer(bus, h.db, h.env.logger, {
      durable: 'redelivery-check',
      subject: 'transfer.observed',
      handler: async (_trx, event) => {
        effects.push(event.id);
      },
    });
    await consumer.start();
    // The same envelope again, as a redelivery would bring it.
    await publishEvent(bus, first!, { msgId: `redeliver-${first!.id}` });
    const total = (await observed()).length;
    await waitFor(async () => {
      const info = await bus.jsm.consumers.info(bus.eventsStream, 'redelivery-check');
      return info.num_pending === 0 && info.num_ack_pending === 0;
    });
    await consumer.stop();
    expect(effects.filter((id) => id === first!.id)).toHaveLength(1);
    expect(effects).toHaveLength(total - 1);
  });
});

describe('chain-indexer replicas: one leads, another takes over when it is killed', () => {
  let h: IndexerHarness;

  function spawnReplica(): ServiceProcess {
    const replica = spawnServiceBundle('chain-indexer', 'test', h.indexerEnv());
    h.onStop(() => replica.kill('SIGKILL'));
    return replica;
  }

  beforeAll(async () => {
    await buildServiceBundles(['chain-indexer'], 'test');
    h = await startIndexerHarness('replicas', { LOG_LEVEL: 'info' }, { stopped: true });
  });

  afterAll(() => h?.stop());

  it('publishes each transfer once across two replicas, and keeps going after the leader is killed', async () => {
    const a = spawnReplica();
    await waitFor(() => a.output().includes('became leader'), {
      timeoutMs: 30_000,
      message: 'replica A never led',
    });
    const b = spawnReplica();
    await waitFor(() => b.output().includes('listening'), {
      timeoutMs: 30_000,
      message: 'replica B never started',
    });
    const send = async (amount: bigint) => (await h.transfer(testWallets.escrow.address, amount)).hash;
    const first = await send(1n * USDC);
    await waitFor(async () => (await h.events('transfer.observed')).length === 1);
    expect(b.output()).not.toContain('became leader');

    await a.kill('SIGKILL');
    await waitFor(() => b.output().includes('became leader'), {
      timeoutMs: 15_000,
      message: 'replica B never took over',
    });
    const second = await send(2n * USDC);
    await waitFor(async () => (await h.events('transfer.observed')).length >= 2);
    // Before looking for a duplicate: B has marked both transfers published and relayed its whole outbox, so
    // anything either replica was going to publish is in the stream by now.
    await waitFor(async () => {
      const state = await sql<{ published: number; waiting: number }>`select
          (select count(*)::int from transfers where status = 'published') published,
          (select count(*)::int from outbox where published_at is null) waiting`.execute(h.db);
      return state.rows[0]!.published === 2 && state.rows[0]!.waiting === 0;
    });
    const final = await h.events('transfer.observed');
    expect(final.map((e) => e.data.txHash)).toEqual([first, second]);
  });
});
