/**
 * The relayer's pool survives a restart mid-burst: settlement (run in this process) is stopped while a burst of
 * settles is being signed over four keys, the node forgets every transaction not mined yet, and a new settlement
 * finishes the burst from what each key recorded. Every authorization is then on chain exactly once, each key's
 * nonces are consecutive, and no transaction of the relayer was spent on a second copy.
 *
 *   npx jest --ci services/settlement/test/relayer-restart.test.ts
 */
import type { RelayerSubmitReply, RelayerSubmitRequest, TransferAuthorization } from '@paygate/contracts';
import {
  setAutomine,
  signTransferAuthorization,
  startRpcProxy,
  testSigner,
  testWallets,
  waitFor,
} from '@paygate/testing';
import { id, toQuantity, Wallet, zeroPadValue } from 'ethers';
import { useSettlementHarness } from './harness';

jest.setTimeout(180_000);

const encoder = new TextEncoder();
const decoder = new TextDecoder();
const PRICE = 10_000n;
const BURST = 40;
const AUTHORIZATION_USED = id('AuthorizationUsed(address,bytes32)');

const extraKeys = [Wallet.createRandom(), Wallet.createRandom(), Wallet.createRandom()];
const poolKeys = [testWallets.relayer.privateKey, ...extraKeys.map((key) => key.privateKey)];
const poolAddresses = [testWallets.relayer.address, ...extraKeys.map((key) => key.address)].map((a) =>
  a.toLowerCase(),
);

describe('x402 relayer pool: stopped mid-burst and started again, every authorization is on chain once', () => {
  const h = useSettlementHarness('relayerrestart', {
    escrowFunds: null,
    buyerFunds: '100',
    // Started by the test, behind a slow RPC hop, so the burst is still being signed when it stops.
    start: false,
    overrides: {
      RELAYER_PRIVATE_KEYS: poolKeys.join(','),
      TRANSFER_POLL_INTERVAL_MS: '100',
      // A transaction the node forgot is sent again (re-signed on its nonce) soon after the restart.
      RELAYER_FEE_BUMP_AFTER_MS: '1000',
      // Behind the slow hop on a loaded machine a chain read can take seconds: the burst is not refused for it.
      RPC_TIMEOUT_MS: '15000',
    },
  });
  const provider = () => h.chain.anvil.provider;
  let rpcProxy: Awaited<ReturnType<typeof startRpcProxy>>;

  beforeAll(async () => {
    for (const key of extraKeys) {
      await provider().send('anvil_setBalance', [key.address, toQuantity(10n ** 19n)]);
    }
    rpcProxy = await startRpcProxy({ upstream: h.chain.anvil.rpcUrl, delayMs: 25 });
  });

  afterAll(async () => {
    await rpcProxy?.close();
  });

  const request = (
    signed: { authorization: TransferAuthorization; signature: string },
    waitMs: number,
  ): RelayerSubmitRequest => ({
    chainId: h.chain.anvil.chainId,
    token: h.chain.usdcAddress,
    authorization: signed.authorization,
    signature: signed.signature,
    waitForReceiptMs: waitMs,
  });

  /** A settle through the bus; undefined when nobody answered (the relayer was stopped). */
  async function submit(
    signed: { authorization: TransferAuthorization; signature: string },
    waitMs: number,
  ): Promise<RelayerSubmitReply | undefined> {
    try {
      const reply = await h.bus.nc.request(
        h.bus.rpcSubject('relayer.submit_authorization'),
        encoder.encode(JSON.stringify(request(signed, waitMs))),
        { timeout: waitMs + 30_000 },
      );
      return JSON.parse(decoder.decode(reply.data)) as RelayerSubmitReply;
    } catch {
      return undefined;
    }
  }

  const minedNonces = () =>
    Promise.all(poolAddresses.map((address) => provider().getTransactionCount(address, 'latest')));

  it(`${BURST} settles over 4 keys, stopped mid-burst, the node's pool lost: each authorization on chain exactly once`, async () => {
    const buyer = testSigner('buyer', provider());
    const signed = await Promise.all(
      Array.from({ length: BURST }, () =>
        signTransferAuthorization(buyer, {
          chainId: h.chain.anvil.chainId,
          usdcAddress: h.chain.usdcAddress,
          to: testWallets.escrow.address,
          valueMicro: PRICE,
        }),
      ),
    );
    const noncesBefore = await minedNonces();
    const fromBlock = await provider().getBlockNumber();
    const nonces = signed.map((s) => s.authorization.nonce.toLowerCase());
    const recorded = () =>
      h.db
        .selectFrom('relayed_authorizations')
        .select((eb) => eb.fn.countAll<string>().as('count'))
        .where('auth_nonce', 'in', nonces)
        .executeTakeFirstOrThrow()
        .then((row) => Number(row.count));

    await h.start({ CHAIN_RPC_URL: rpcProxy.url });
    await setAutomine(provider(), false);
    let firstReplies: Array<RelayerSubmitReply | undefined>;
    try {
      // Sent one after another, a few milliseconds apart: some recorded, some being signed, some not arrived yet.
      const answered: Array<Promise<RelayerSubmitReply | undefined>> = [];
      const early: Array<RelayerSubmitReply | undefined> = [];
      for (const [i, one] of signed.entries()) {
        answered.push(
          submit(one, 20_000).then((reply) => {
            early.push(reply);
            return reply;
          }),
        );
        if (i === BURST / 2) {
          await waitFor(async () => (await recorded()) >= BURST / 8, {
            timeoutMs: 120_000,
            intervalMs: 10,
            message: async () =>
              `an eighth of the burst recorded (${await recorded()} were; answers so far ${JSON.stringify(early.slice(0, 3))})`,
          });
          await h.service.stop();
        }
      }
      firstReplies = await Promise.all(answered);
      // The node restarts too: whatever it had not mined is gone.
      await provider().send('anvil_dropAllTransactions', []);
    } finally {
      await setAutomine(provider(), true);
    }
    const recordedAtStop = await recorded();
    expect(recordedAtStop).toBeGreaterThanOrEqual(BURST / 8);
    expect(recordedAtStop).toBeLessThan(BURST);
    // Stopping answered the callers it had (their transactions recorded), the rest heard nothing.
    for (const reply of firstReplies) {
      if (reply) expect(reply).toMatchObject({ ok: true });
    }

    // Started again: every settle asked again (as its client retries) is answered confirmed, from one transaction.
    await h.start();
    const replies = await Promise.all(signed.map((one) => submit(one, 30_000)));
    for (const reply of replies) expect(reply).toMatchObject({ ok: true, status: 'confirmed' });

    // On chain: one AuthorizationUsed per authorization, every one into escrow, from a transaction of the pool.
    const used = await provider().getLogs({
      address: h.chain.usdcAddress,
      topics: [AUTHORIZATION_USED, zeroPadValue(testWallets.buyer.address, 32)],
      fromBlock,
    });
    const usedNonces = used.map((log) => log.topics[2]!.toLowerCase());
    expect(usedNonces.sort()).toEqual([...nonces].sort());
    const rows = await waitFor(
      async () => {
        const found = await h.db
          .selectFrom('relayed_authorizations')
          .select(['relayer_address', 'relayer_nonce', 'status', 'settled_tx_hash'])
          .where('auth_nonce', 'in', nonces)
          .execute();
        return found.length === BURST && found.every((row) => row.status === 'confirmed') && found;
      },
      { timeoutMs: 30_000, message: 'the burst rows were not all confirmed' },
    );
    expect(new Set(rows.map((row) => row.settled_tx_hash)).size).toBe(BURST);
    for (const log of used) {
      expect(rows.map((row) => row.settled_tx_hash)).toContain(log.transactionHash.toLowerCase());
    }
    // Each key: consecutive nonces from where it was, exactly as many transactions mined as it has rows (nothing
    // spent on a copy of an authorization already sent).
    const noncesAfter = await minedNonces();
    for (const [i, address] of poolAddresses.entries()) {
      const own = rows
        .filter((row) => row.relayer_address === address)
        .map((row) => Number(row.relayer_nonce))
        .sort((a, b) => a - b);
      expect(own).toEqual(Array.from({ length: own.length }, (_, n) => noncesBefore[i]! + n));
      expect(noncesAfter[i]).toBe(noncesBefore[i]! + own.length);
    }
    expect(await h.chain.balanceOf(testWallets.escrow.address)).toBe(PRICE * BigInt(BURST));
  });
});
