/**
 * The relayer's pool of keys (RELAYER_PRIVATE_KEYS): a burst of 100 concurrent settles is spread over the keys, each
 * with its own consecutive nonces, and enters the chain's pool together (one block when the chain takes them all);
 * a key whose transaction is stuck is skipped by new submissions, which the other keys settle meanwhile.
 *
 *   npx jest --ci services/settlement/test/relayer-pool.test.ts
 */
import type { RelayerSubmitReply, RelayerSubmitRequest, TransferAuthorization } from '@paygate/contracts';
import {
  mine,
  setAutomine,
  signTransferAuthorization,
  testSigner,
  testWallets,
  waitFor,
} from '@paygate/testing';
import { toQuantity, Wallet } from 'ethers';
import { useSettlementHarness } from './harness';

jest.setTimeout(180_000);

const encoder = new TextEncoder();
const decoder = new TextDecoder();
const PRICE = 10_000n; // 0.01 USDC
const BURST = 100;
const STUCK_AFTER_MS = 300;

/** Four gas-only keys: the test relayer's, and three fresh ones given ETH on the test chain. */
const extraKeys = [Wallet.createRandom(), Wallet.createRandom(), Wallet.createRandom()];
const poolKeys = [testWallets.relayer.privateKey, ...extraKeys.map((key) => key.privateKey)];
const poolAddresses = [testWallets.relayer.address, ...extraKeys.map((key) => key.address)].map((a) =>
  a.toLowerCase(),
);

describe('x402 relayer: a pool of keys', () => {
  const h = useSettlementHarness('relayerpool', {
    escrowFunds: null,
    buyerFunds: '100',
    overrides: {
      RELAYER_PRIVATE_KEYS: poolKeys.join(','),
      TRANSFER_POLL_INTERVAL_MS: '100',
      RELAYER_STUCK_AFTER_MS: String(STUCK_AFTER_MS),
      // Kept from bumping (which would re-sign) while a test holds a key's transaction back.
      RELAYER_FEE_BUMP_AFTER_MS: '600000',
    },
  });
  const provider = () => h.chain.anvil.provider;

  beforeAll(async () => {
    for (const key of extraKeys) {
      await provider().send('anvil_setBalance', [key.address, toQuantity(10n ** 19n)]);
    }
  });

  async function rpc<T>(subject: string, body: unknown, timeoutMs = 60_000): Promise<T> {
    const reply = await h.bus.nc.request(h.bus.rpcSubject(subject), encoder.encode(JSON.stringify(body)), {
      timeout: timeoutMs,
    });
    return JSON.parse(decoder.decode(reply.data)) as T;
  }

  const submit = (signed: { authorization: TransferAuthorization; signature: string }, waitMs = 30_000) =>
    rpc<RelayerSubmitReply>('relayer.submit_authorization', {
      chainId: h.chain.anvil.chainId,
      token: h.chain.usdcAddress,
      authorization: signed.authorization,
      signature: signed.signature,
      waitForReceiptMs: waitMs,
    } satisfies RelayerSubmitRequest);

  const sign = () =>
    signTransferAuthorization(testSigner('buyer', provider()), {
      chainId: h.chain.anvil.chainId,
      usdcAddress: h.chain.usdcAddress,
      to: testWallets.escrow.address,
      valueMicro: PRICE,
    });

  const pendingNonces = () =>
    Promise.all(poolAddresses.map((address) => provider().getTransactionCount(address, 'pending')));
  const minedNonces = () =>
    Promise.all(poolAddresses.map((address) => provider().getTransactionCount(address, 'latest')));
  const sum = (values: number[]) => values.reduce((a, b) => a + b, 0);

  it('lists every key in relayer.status', async () => {
    const status = await rpc<{ available: boolean; signers: Array<{ address: string; available: boolean }> }>(
      'relayer.status',
      {},
    );
    expect(status.available).toBe(true);
    expect(status.signers.map((s) => s.address.toLowerCase())).toEqual(poolAddresses);
    expect(status.signers.every((s) => s.available)).toBe(true);
  });

  it(`a burst of ${BURST} concurrent settles is spread over the keys, consecutive nonces each, and lands in one block`, async () => {
    const signed = await Promise.all(Array.from({ length: BURST }, () => sign()));
    const before = await minedNonces();
    // The chain holds its next block until the whole burst is in its pool: every settle that enters it in time is
    // in that block, so the count of blocks is the relayer's doing, not the machine's speed.
    await setAutomine(provider(), false);
    let replies: RelayerSubmitReply[];
    try {
      const answered = Promise.all(signed.map((one) => submit(one)));
      await waitFor(async () => sum(await pendingNonces()) === sum(before) + BURST, {
        timeoutMs: 60_000,
        intervalMs: 20,
        message: `the burst's ${BURST} transactions in the chain's pool together`,
      });
      await mine(provider(), 1);
      replies = await answered;
    } finally {
      await setAutomine(provider(), true);
    }
    for (const reply of replies) expect(reply).toMatchObject({ ok: true, status: 'confirmed' });
    const blocks = new Set(replies.map((reply) => (reply.ok ? reply.blockNumber : -1)));
    expect([...blocks]).toHaveLength(1);

    const rows = await waitFor(
      async () => {
        const found = await h.db
          .selectFrom('relayed_authorizations')
          .select(['relayer_address', 'relayer_nonce', 'status'])
          .where(
            'auth_nonce',
            'in',
            signed.map((s) => s.authorization.nonce.toLowerCase()),
          )
          .execute();
        return found.length === BURST && found.every((row) => row.status === 'confirmed') && found;
      },
      { timeoutMs: 20_000, message: 'the burst rows were not finished' },
    );
    // Least loaded first, in turn: every key took a share (the burst is assigned before any is answered).
    const after = await minedNonces();
    for (const [i, address] of poolAddresses.entries()) {
      const nonces = rows
        .filter((row) => row.relayer_address === address)
        .map((row) => Number(row.relayer_nonce))
        .sort((a, b) => a - b);
      expect(nonces.length).toBeGreaterThanOrEqual(BURST / poolAddresses.length - 2);
      expect(nonces.length).toBeLessThanOrEqual(BURST / poolAddresses.length + 2);
      // Its own sequence, no gap, no twice: exactly what the chain consumed for that key.
      expect(nonces).toEqual(Array.from({ length: nonces.length }, (_, n) => before[i]! + n));
      expect(after[i]).toBe(before[i]! + nonces.length);
    }
  });

  it('a key whose transaction is stuck gets no new submissions: the other keys settle them meanwhile', async () => {
    // The next submission's transaction is held back: taken out of the chain's pool before it is mined.
    await setAutomine(provider(), false);
    const held = await sign();
    const heldReply = submit(held, 60_000);
    let heldRow: { id: string; relayer_address: string; tx_hash: string | null; raw_tx: string | null };
    try {
      heldRow = await waitFor(
        () =>
          h.db
            .selectFrom('relayed_authorizations')
            .select(['id', 'relayer_address', 'tx_hash', 'raw_tx'])
            .where('auth_nonce', '=', held.authorization.nonce.toLowerCase())
            .where('status', '=', 'broadcast')
            .executeTakeFirst(),
        { timeoutMs: 20_000, message: 'the held submission was not broadcast' },
      );
      await provider().send('anvil_dropTransaction', [heldRow.tx_hash]);
    } finally {
      await setAutomine(provider(), true);
    }
    const stuckKey = heldRow.relayer_address;
    // Seen stuck once its transaction waited RELAYER_STUCK_AFTER_MS (by the waiting caller or the background pass).
    await waitFor(() => h.service.relayer!.keys().find((key) => key.address === stuckKey)?.stuck, {
      timeoutMs: 20_000,
      message: 'the key with the held transaction was not seen stuck',
    });
    // Scraped as a gauge per key (what an alert on a stuck relayer key reads).
    const scraped = await (await fetch(`${h.service.url}/metrics`)).text();
    expect(scraped).toMatch(new RegExp(`settlement_relayer_key_stuck\\{address="${stuckKey}"[^}]*\\} 1`));

    // Every other key's transactions wait past RELAYER_STUCK_AFTER_MS as well (blocks held back), as under load
    // when receipts come later than that: the next submission goes to the key that waited the least, never to the
    // one whose queue cannot move (with two waiting on each other key, it was the least loaded).
    const waiting = await Promise.all(Array.from({ length: 2 * (poolAddresses.length - 1) }, () => sign()));
    const last = await sign();
    const keysSeen = async () => `keys seen: ${JSON.stringify(h.service.relayer!.keys())}`;
    // A key's stuck mark from the background pass is its last look at the key's rows (the burst's, open while it
    // looked), not cleared before its next look: a key still marked then gets none of the batch, has nothing
    // waiting, and is never stuck. Each other key seen free with nothing assigned first: each takes a share.
    await waitFor(
      () =>
        h.service
          .relayer!.keys()
          .every((key) => (key.address === stuckKey ? key.stuck : !key.stuck && key.load === 0)),
      { message: async () => `the other keys not seen free before the batch; ${await keysSeen()}` },
    );
    let waitingReplies: Promise<RelayerSubmitReply[]>;
    let lastReply: Promise<RelayerSubmitReply>;
    await setAutomine(provider(), false);
    try {
      const pendingBefore = sum(await pendingNonces());
      waitingReplies = Promise.all(waiting.map((one) => submit(one)));
      await waitFor(async () => sum(await pendingNonces()) === pendingBefore + waiting.length, {
        timeoutMs: 30_000,
        intervalMs: 20,
        message: 'the waiting transactions in the chain pool',
      });
      await waitFor(() => h.service.relayer!.keys().every((key) => key.stuck), {
        message: async () => `every key seen stuck; ${await keysSeen()}`,
      });
      lastReply = submit(last);
      const lastRow = await waitFor(
        () =>
          h.db
            .selectFrom('relayed_authorizations')
            .select('relayer_address')
            .where('auth_nonce', '=', last.authorization.nonce.toLowerCase())
            .executeTakeFirst(),
        { timeoutMs: 30_000, message: 'the last submission was not recorded' },
      );
      expect(lastRow.relayer_address).not.toBe(stuckKey);
      await mine(provider(), 1);
    } finally {
      await setAutomine(provider(), true);
    }
    for (const reply of [...(await waitingReplies), await lastReply]) {
      expect(reply).toMatchObject({ ok: true, status: 'confirmed' });
    }

    const others = await Promise.all(Array.from({ length: 8 }, () => sign()));
    const replies = await Promise.all(others.map((one) => submit(one)));
    for (const reply of replies) expect(reply).toMatchObject({ ok: true, status: 'confirmed' });
    const used = await h.db
      .selectFrom('relayed_authorizations')
      .select('relayer_address')
      .where(
        'auth_nonce',
        'in',
        others.map((s) => s.authorization.nonce.toLowerCase()),
      )
      .execute();
    expect(used).toHaveLength(others.length);
    expect(used.map((row) => row.relayer_address)).not.toContain(stuckKey);

    // Its transaction back in the chain's pool: it is mined, its caller is answered, the key takes work again.
    await provider().send('eth_sendRawTransaction', [heldRow.raw_tx]);
    // Its caller's wait may have ended meanwhile (a slow host): the same request asked again is answered from its row.
    const heldAnswer = await heldReply;
    const heldFinal = heldAnswer.ok && heldAnswer.status === 'submitted' ? await submit(held) : heldAnswer;
    expect(heldFinal).toMatchObject({ ok: true, status: 'confirmed', txHash: heldRow.tx_hash });
    await waitFor(() => h.service.relayer!.keys().find((key) => key.address === stuckKey)?.stuck === false, {
      timeoutMs: 20_000,
      message: 'the key was still seen stuck after its transaction was mined',
    });
  });
});
