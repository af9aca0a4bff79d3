import { InboxConsumer } from '@paygate/bus';
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
  type ServiceProcess,
  startAnvil,
  type TestEnvironment,
  testWallets,
  waitFor,
} from '@paygate/testing';
import { buildServiceBundles, spawnServiceBundle } from '@paygate/testing/service-bundles';
import { Contract, Wallet } from 'ethers';
import { type Kysely, sql } from 'kysely';
import { loadConfig, startChainIndexer } from '../src';
import { insertTransfers } from '../src/indexer/scanner';
import type { IndexerDatabase } from '../src/indexer/tables';
import { indexerCaughtUp } from './caught-up';

const USDC = 1_000_000n;

describe('chain-indexer on anvil: transfer.observed exactly once', () => {
  let env: TestEnvironment;
  let anvil: AnvilInstance;
  let usdcAddress: string;
  let indexer: RunningService<IndexerDatabase> | undefined;
  let db: Kysely<any>;

  const indexerEnv = (extra: Record<string, string> = {}) =>
    env.envFor('chain-indexer', {
      CHAIN_RPC_URL: anvil.rpcUrl,
      USDC_ADDRESS: usdcAddress,
      ESCROW_ADDRESS: testWallets.escrow.address,
      CONFIRMATIONS: '2',
      POLL_INTERVAL_MS: '50',
      LEADER_RETRY_MS: '200',
      ...extra,
    });

  async function pay(to: string, amountMicro: bigint, token = usdcAddress): Promise<string> {
    const buyer = new Wallet(testWallets.buyer.privateKey, anvil.provider);
    const usdc = new Contract(token, usdcAbi, buyer);
    const tx = await usdc.getFunction('transfer')(to, amountMicro);
    await minedReceipt(tx);
    return tx.hash as string;
  }

  async function observed() {
    const bus = await env.bus();
    return countStreamMessages(bus, 'transfer.observed');
  }

  const caughtUp = () => indexerCaughtUp(indexer!, db, anvil.provider);

  beforeAll(async () => {
    env = await createTestEnvironment('indexer');
    anvil = await startAnvil();
    ({ address: usdcAddress } = await deployTestUsdc(anvil.rpcUrl));
    await fundTestWallets({ rpcUrl: anvil.rpcUrl, usdcAddress, amountMicro: 1000n * USDC });
    indexer = await startChainIndexer(loadConfig(indexerEnv()));
    db = openSchema(env.schemaFor('chain-indexer'));
  });

  afterAll(async () => {
    await indexer?.stop();
    await db?.destroy();
    await anvil?.stop();
    await env?.cleanup();
  });

  it('publishes one event per transfer once it has the confirmations, with every field', async () => {
    const txHash = await pay(testWallets.escrow.address, 1_500_000n);
    await caughtUp();
    expect(await observed()).toHaveLength(0); // one confirmation so far, two required
    await mine(anvil.provider, 1);
    const events = await waitFor(async () => {
      const all = await observed();
      return all.length === 1 ? all : undefined;
    });
    const receipt = await anvil.provider.getTransactionReceipt(txHash);
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
        token: usdcAddress,
        amount: '1.5',
        confirmations: 2,
      },
    });
    await mine(anvil.provider, 3);
    await caughtUp();
    expect(await observed()).toHaveLength(1);
  });

  it('ignores transfers to another address and transfers of another token', async () => {
    const before = (await observed()).length;
    const { address: otherToken } = await deployTestUsdc(anvil.rpcUrl);
    await fundTestWallets({ rpcUrl: anvil.rpcUrl, usdcAddress: otherToken, amountMicro: 10n * USDC });
    await pay(testWallets.stranger.address, 2n * USDC);
    await pay(testWallets.escrow.address, 3n * USDC, otherToken);
    await mine(anvil.provider, 3);
    await caughtUp();
    expect(await observed()).toHaveLength(before);
  });

  it('is never ready on an RPC of another chain than CHAIN_NETWORK, and /readyz names both chain ids', async () => {
    const elsewhere = await createTestEnvironment('indexerwrongchain');
    const wrongChain = await startChainIndexer(
      loadConfig(
        elsewhere.envFor('chain-indexer', {
          CHAIN_RPC_URL: anvil.rpcUrl,
          CHAIN_NETWORK: 'base-sepolia',
          ESCROW_ADDRESS: testWallets.escrow.address,
        }),
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
      expect((await fetch(`${indexer!.url}/readyz`)).status).toBe(200);
    } finally {
      await wrongChain.stop();
      await elsewhere.cleanup();
    }
  });

  it('resumes after a restart with no gap and no duplicate', async () => {
    const before = (await observed()).length;
    await indexer!.stop();
    const whileDown = [
      await pay(testWallets.escrow.address, 4n * USDC),
      await pay(testWallets.escrow.address, 5n * USDC),
    ];
    await mine(anvil.provider, 2);
    indexer = await startChainIndexer(loadConfig(indexerEnv()));
    const events = await waitFor(async () => {
      const all = await observed();
      return all.length === before + 2 ? all : undefined;
    });
    expect(events.slice(before).map((e) => (e.data as { txHash: string }).txHash)).toEqual(whileDown);
    await mine(anvil.provider, 2);
    await caughtUp();
    expect(await observed()).toHaveLength(before + 2);
  });

  it('publishes transfer.reorged when a reorg removes a published transfer', async () => {
    const txHash = await pay(testWallets.escrow.address, 6n * USDC);
    await mine(anvil.provider, 1);
    await waitFor(async () =>
      (await observed()).some((e) => (e.data as { txHash: string }).txHash === txHash),
    );
    // Replace the last 3 blocks (the transfer's and two after it) with empty ones.
    await reorg(anvil.provider, 3);
    const bus = await env.bus();
    const reorged = await waitFor(async () => {
      const all = await countStreamMessages(bus, 'transfer.reorged');
      return all.length === 1 ? all : undefined;
    });
    expect(reorged[0]!.data).toMatchObject({ txHash, amount: '6' });
    expect(await anvil.provider.getTransactionReceipt(txHash)).toBeNull();
    const row = await db
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
      token: usdcAddress.toLowerCase(),
      from_address: testWallets.buyer.address.toLowerCase(),
      to_address: testWallets.escrow.address.toLowerCase(),
      amount_micro: 7n * USDC,
      status,
      published_at: new Date(),
      reorged_at: status === 'reorged' ? new Date() : null,
    });
    const reversed = row('reorged', `0x${'1'.repeat(64)}`);
    const live = row('published', `0x${'2'.repeat(64)}`);
    await db.insertInto('transfers').values([reversed, live]).execute();
    await db.transaction().execute((trx) =>
      insertTransfers(trx, [
        { ...reversed, status: 'pending', published_at: null, reorged_at: null },
        { ...live, status: 'pending', published_at: null, reorged_at: null },
      ]),
    );
    const after = await db
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
    const bus = await env.bus();
    const [first] = await observed();
    const effects: string[] = [];
    const consumer = new InboxConsumer(bus, db, env.logger, {
      durable: 'redelivery-check',
      subject: 'transfer.observed',
      handler: async (_trx, event) => {
        effects.push(event.id);
      },
    });
    await consumer.start();
    // The same envelope again, as a redelivery would bring it.
    await bus.js.publish(
      bus.subjectFor('transfer.observed'),
      new TextEncoder().encode(JSON.stringify(first)),
      {
        msgID: `redeliver-${first!.id}`,
      },
    );
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
  let env: TestEnvironment;
  let anvil: AnvilInstance;
  let usdcAddress: string;
  const replicas: ServiceProcess[] = [];

  function spawnReplica(): ServiceProcess {
    const replica = spawnServiceBundle(
      'chain-indexer',
      'test',
      env.envFor('chain-indexer', {
        CHAIN_RPC_URL: anvil.rpcUrl,
        USDC_ADDRESS: usdcAddress,
        ESCROW_ADDRESS: testWallets.escrow.address,
        CONFIRMATIONS: '1',
        POLL_INTERVAL_MS: '50',
        LEADER_RETRY_MS: '200',
        LOG_LEVEL: 'info',
      }),
    );
    replicas.push(replica);
    return replica;
  }

  beforeAll(async () => {
    await buildServiceBundles(['chain-indexer'], 'test');
    env = await createTestEnvironment('replicas');
    anvil = await startAnvil();
    ({ address: usdcAddress } = await deployTestUsdc(anvil.rpcUrl));
    await fundTestWallets({ rpcUrl: anvil.rpcUrl, usdcAddress, amountMicro: 100n * USDC });
  });

  afterAll(async () => {
    for (const replica of replicas) await replica.kill('SIGKILL');
    await anvil?.stop();
    await env?.cleanup();
  });

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
    const bus = await env.bus();
    const buyer = new Wallet(testWallets.buyer.privateKey, anvil.provider);
    const usdc = new Contract(usdcAddress, usdcAbi, buyer);
    const send = async (amount: bigint) => {
      const tx = await usdc.getFunction('transfer')(testWallets.escrow.address, amount);
      await minedReceipt(tx);
      return tx.hash as string;
    };
    const first = await send(1n * USDC);
    await waitFor(async () => (await countStreamMessages(bus, 'transfer.observed')).length === 1);
    expect(b.output()).not.toContain('became leader');

    await a.kill('SIGKILL');
    await waitFor(() => b.output().includes('became leader'), {
      timeoutMs: 15_000,
      message: 'replica B never took over',
    });
    const second = await send(2n * USDC);
    await waitFor(async () => (await countStreamMessages(bus, 'transfer.observed')).length >= 2);
    // Before looking for a duplicate: B has marked both transfers published and relayed its whole outbox, so
    // anything either replica was going to publish is in the stream by now.
    const db = openSchema(env.schemaFor('chain-indexer'));
    try {
      await waitFor(async () => {
        const state = await sql<{ published: number; waiting: number }>`select
            (select count(*)::int from transfers where status = 'published') published,
            (select count(*)::int from outbox where published_at is null) waiting`.execute(db);
        return state.rows[0]!.published === 2 && state.rows[0]!.waiting === 0;
      });
    } finally {
      await db.destroy();
    }
    const final = await countStreamMessages(bus, 'transfer.observed');
    expect(final.map((e) => (e.data as { txHash: string }).txHash)).toEqual([first, second]);
  });
});
