import type { Bus } from '@paygate/bus';
import type { RelayerSubmitReply, RelayerSubmitRequest } from '@paygate/contracts';
import {
  type AnvilInstance,
  createTestEnvironment,
  deployTestUsdc,
  fundTestWallets,
  openSchema,
  signTransferAuthorization,
  startAnvil,
  startRpcProxy,
  type TestEnvironment,
  testSigner,
  testWallets,
  waitFor,
} from '@paygate/testing';
import type { Kysely } from 'kysely';
import { loadConfig, type RunningSettlement, startSettlement } from '../src';
import type { SettlementDB } from '../src/db';
import { settlementEnv, type TestChain } from './helpers';

jest.setTimeout(90_000);

const RPC_DELAY_MS = 40;
const BURST = 10;
const PRICE = 20_000n;

/**
 * A JSON-RPC hop with a real network's latency in front of anvil: on a local node every RPC is ~1 ms, which hides
 * whatever the relayer does while holding its nonce lock; at 40 ms per call a lock that waits for the chain lets
 * a burst trickle into the pool over more than a block.
 */
const slowRpc = (target: string) => startRpcProxy({ upstream: target, delayMs: RPC_DELAY_MS });

describe('relayer pipelining: a burst of payments enters the pool together and lands in one block', () => {
  let env: TestEnvironment;
  let anvil: AnvilInstance;
  let rpc: Awaited<ReturnType<typeof slowRpc>>;
  let usdcAddress: string;
  let bus: Bus;
  let service: RunningSettlement;
  let db: Kysely<SettlementDB>;

  beforeAll(async () => {
    env = await createTestEnvironment('relayburst');
    // Blocks every second (a real chain's rhythm, not one block per transaction).
    anvil = await startAnvil({ fresh: true, blockTimeSec: 1 });
    usdcAddress = (await deployTestUsdc(anvil.rpcUrl)).address;
    await fundTestWallets({ rpcUrl: anvil.rpcUrl, usdcAddress, amountMicro: 10_000_000n, roles: ['buyer'] });
    rpc = await slowRpc(anvil.rpcUrl);
    bus = await env.bus();
    const chain = { anvil: { ...anvil, rpcUrl: rpc.url }, usdcAddress } as unknown as TestChain;
    service = await startSettlement(
      loadConfig(
        settlementEnv(env, chain, {
          RELAYER_PRIVATE_KEY: testWallets.relayer.privateKey,
          RELAYER_RECEIPT_POLL_MS: '100',
        }),
      ),
    );
    db = openSchema<SettlementDB>(env.schemaFor('settlement'));
  });

  afterAll(async () => {
    await service?.stop();
    await db?.destroy();
    await rpc?.close();
    await anvil?.stop();
    await env?.cleanup();
  });

  it(`${BURST} concurrent submissions are signed with consecutive relayer nonces, one each, and all land in one block`, async () => {
    const provider = anvil.provider;
    const buyer = testSigner('buyer', anvil.provider);
    const requests: RelayerSubmitRequest[] = [];
    for (let i = 0; i < BURST; i++) {
      const signed = await signTransferAuthorization(buyer, {
        chainId: anvil.chainId,
        usdcAddress,
        to: testWallets.escrow.address,
        valueMicro: PRICE,
      });
      requests.push({
        chainId: anvil.chainId,
        token: usdcAddress,
        authorization: signed.authorization,
        signature: signed.signature,
        waitForReceiptMs: 20_000,
      });
    }
    const nonceBefore = await provider.getTransactionCount(testWallets.relayer.address, 'latest');
    // The chain holds its next block until the whole burst is in the pool: a relayer that sent one transaction at a
    // time (waiting for each to be included) would never get there. With blocks every second the test instead
    // depended on the machine's speed: a loaded clean-clone run's burst took longer than a block and landed in two.
    await provider.send('evm_setIntervalMining', [0]);
    const encoder = new TextEncoder();
    rpc.calls.clear();
    let replies: RelayerSubmitReply[];
    try {
      const answered = Promise.all(
        requests.map(async (request) => {
          const answer = await bus.nc.request(
            bus.rpcSubject('relayer.submit_authorization'),
            encoder.encode(JSON.stringify(request)),
            { timeout: 30_000 },
          );
          return JSON.parse(new TextDecoder().decode(answer.data)) as RelayerSubmitReply;
        }),
      );
      await waitFor(
        async () =>
          (await provider.getTransactionCount(testWallets.relayer.address, 'pending')) ===
          nonceBefore + BURST,
        {
          timeoutMs: 20_000,
          intervalMs: 20,
          message: `the burst's ${BURST} transactions in the pool together`,
        },
      );
      await provider.send('evm_mine', []);
      replies = await answered;
    } finally {
      await provider.send('evm_setIntervalMining', [1]);
    }
    for (const reply of replies) expect(reply).toMatchObject({ ok: true, status: 'confirmed' });
    const blocks = new Set(replies.map((reply) => (reply.ok ? reply.blockNumber : -1)));
    expect([...blocks]).toHaveLength(1);
    // Woken by a new head, the callers looked their receipts up in its block together (eth_getBlockReceipts, one
    // read per head for the ten of them) rather than one receipt read each.
    // (With the chain held, a caller's own receipt poll may find its receipt first: at most one read per head.)
    expect(rpc.calls.get('eth_getBlockReceipts') ?? 0).toBeLessThanOrEqual(
      rpc.calls.get('eth_blockNumber') ?? 0,
    );

    // Callers are answered from the receipts; the rows are finished just after.
    const rows = await waitFor(
      async () => {
        const found = await db
          .selectFrom('relayed_authorizations')
          .select([
            'auth_nonce',
            'relayer_nonce',
            'status',
            'tx_hash',
            'settled_tx_hash',
            'earlier_tx_hashes',
          ])
          .where(
            'auth_nonce',
            'in',
            requests.map((r) => r.authorization.nonce.toLowerCase()),
          )
          .execute();
        return found.every((row) => row.status === 'confirmed') && found;
      },
      { timeoutMs: 10_000, message: 'the relayed rows were not finished' },
    );
    expect(rows).toHaveLength(BURST);
    const nonces = rows.map((row) => Number(row.relayer_nonce)).sort((a, b) => a - b);
    expect(nonces).toEqual(Array.from({ length: BURST }, (_, i) => nonceBefore + i));
    for (const row of rows) {
      expect(row.status).toBe('confirmed');
      expect(row.settled_tx_hash).toBe(row.tx_hash);
      expect(row.earlier_tx_hashes).toEqual([]);
    }
    expect(await provider.getTransactionCount(testWallets.relayer.address, 'latest')).toBe(
      nonceBefore + BURST,
    );
  });
});
