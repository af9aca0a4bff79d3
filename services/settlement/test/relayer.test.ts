import { formatAddress, getTransferLogs, usdcAbi } from '@paygate/chain';
import type { RelayerStatusReply, RelayerSubmitReply, RelayerSubmitRequest } from '@paygate/contracts';
import {
  mine,
  minedReceipt,
  setAutomine,
  signTransferAuthorization,
  submitTransferAuthorization,
  testSigner,
  testWallets,
  waitFor,
} from '@paygate/testing';
import { Contract } from 'ethers';
import { ServiceError } from 'nats';
import { useSettlementHarness } from './harness';

const encoder = new TextEncoder();
const decoder = new TextDecoder();
const PRICE = 50_000n; // 0.05 USDC

describe('x402 relayer: EIP-3009 authorizations submitted once, with a gas-only key', () => {
  const h = useSettlementHarness('relayer', {
    escrowFunds: null,
    buyerFunds: '10',
    overrides: {
      RELAYER_PRIVATE_KEY: testWallets.relayer.privateKey,
      RELAYER_FEE_BUMP_AFTER_MS: '400',
      TRANSFER_POLL_INTERVAL_MS: '100',
    },
  });
  const escrow = testWallets.escrow.address;

  async function rpc<T>(subject: string, body: unknown, timeoutMs = 15_000): Promise<T> {
    const reply = await h.bus.nc.request(h.bus.rpcSubject(subject), encoder.encode(JSON.stringify(body)), {
      timeout: timeoutMs,
    });
    return JSON.parse(decoder.decode(reply.data)) as T;
  }

  async function authorization(
    role: 'buyer' | 'stranger',
    overrides: Partial<Parameters<typeof signTransferAuthorization>[1]> = {},
  ) {
    return signTransferAuthorization(testSigner(role, h.chain.anvil.provider), {
      chainId: h.chain.anvil.chainId,
      usdcAddress: h.chain.usdcAddress,
      to: escrow,
      valueMicro: PRICE,
      ...overrides,
    });
  }

  const request = (
    signed: Awaited<ReturnType<typeof authorization>>,
    waitForReceiptMs = 10_000,
  ): RelayerSubmitRequest => ({
    chainId: h.chain.anvil.chainId,
    token: h.chain.usdcAddress,
    authorization: signed.authorization,
    signature: signed.signature,
    waitForReceiptMs,
  });

  async function transfersIntoEscrow(from: string) {
    const head = await h.chain.anvil.provider.getBlockNumber();
    const logs = await getTransferLogs(h.chain.anvil.provider, {
      token: h.chain.usdcAddress,
      fromBlock: 0,
      toBlock: head,
      maxRangeBlocks: 10_000,
    });
    return logs.filter((log) => log.to === formatAddress(escrow) && log.from === formatAddress(from));
  }
  const relayerNonce = () =>
    h.chain.anvil.provider.getTransactionCount(testWallets.relayer.address, 'latest');

  it('submits once: the payer pays escrow, the relayer pays gas only; replays and 20 concurrent copies send nothing more', async () => {
    const usdc = new Contract(h.chain.usdcAddress, usdcAbi, h.chain.anvil.provider);
    const escrowBefore = await h.chain.balanceOf(escrow);
    const relayerEthBefore = await h.chain.anvil.provider.getBalance(testWallets.relayer.address);
    const signed = await authorization('buyer');

    const first = await rpc<RelayerSubmitReply>('relayer.submit_authorization', request(signed));
    expect(first).toMatchObject({ ok: true, status: 'confirmed', usedElsewhere: false });
    if (!first.ok) throw new Error('unreachable');
    expect(await h.chain.balanceOf(escrow)).toBe(escrowBefore + PRICE);
    expect(await h.chain.anvil.provider.getBalance(testWallets.relayer.address)).toBeLessThan(
      relayerEthBefore,
    );
    expect(BigInt(await usdc.getFunction('balanceOf')(testWallets.relayer.address))).toBe(0n);
    const receipt = await h.chain.anvil.provider.getTransactionReceipt(first.txHash);
    expect(receipt?.logs[first.logIndex!]?.index).toBe(first.logIndex);

    const replies = await Promise.all(
      Array.from({ length: 20 }, () =>
        rpc<RelayerSubmitReply>('relayer.submit_authorization', request(signed)),
      ),
    );
    for (const reply of replies) expect(reply).toMatchObject({ ok: true, txHash: first.txHash });
    expect((await transfersIntoEscrow(testWallets.buyer.address)).length).toBe(1);
    expect(await h.db.selectFrom('relayed_authorizations').select('id').execute()).toHaveLength(1);
  });

  it('20 concurrent first submissions of one new authorization make one transaction', async () => {
    const signed = await authorization('buyer');
    const nonceBefore = await relayerNonce();
    const replies = await Promise.all(
      Array.from({ length: 20 }, () =>
        rpc<RelayerSubmitReply>('relayer.submit_authorization', request(signed)),
      ),
    );
    const hashes = new Set(replies.map((r) => (r.ok ? r.txHash : r.reason)));
    expect(hashes.size).toBe(1);
    expect(replies[0]).toMatchObject({ ok: true, status: 'confirmed' });
    expect(await relayerNonce()).toBe(nonceBefore + 1);
  });

  it('refuses, with x402 reasons and without spending gas: bad signature, expired, not yet valid, too poor, wrong payTo, conflicting copy', async () => {
    const nonceBefore = await relayerNonce();
    const now = Math.floor(Date.now() / 1000);
    const good = await authorization('buyer');
    const forged = { ...good, authorization: { ...good.authorization, value: '60000' } };
    expect(await rpc<RelayerSubmitReply>('relayer.submit_authorization', request(forged))).toMatchObject({
      ok: false,
      reason: 'invalid_signature',
    });
    const expired = await authorization('buyer', { validBefore: now - 5 });
    expect(await rpc<RelayerSubmitReply>('relayer.submit_authorization', request(expired))).toMatchObject({
      ok: false,
      reason: 'authorization_expired',
    });
    const early = await authorization('buyer', { validAfter: now + 600 });
    expect(await rpc<RelayerSubmitReply>('relayer.submit_authorization', request(early))).toMatchObject({
      ok: false,
      reason: 'authorization_not_yet_valid',
    });
    const poor = await authorization('stranger'); // the stranger holds no USDC here
    expect(await rpc<RelayerSubmitReply>('relayer.submit_authorization', request(poor))).toMatchObject({
      ok: false,
      reason: 'insufficient_funds',
    });
    const elsewhere = await authorization('buyer', { to: testWallets.stranger.address });
    expect(await rpc<RelayerSubmitReply>('relayer.submit_authorization', request(elsewhere))).toMatchObject({
      ok: false,
      reason: 'invalid_request',
    });
    // A request that breaks the contract is refused as a NATS service error 400 naming the field.
    const malformed = await h.bus.nc.request(
      h.bus.rpcSubject('relayer.submit_authorization'),
      encoder.encode(JSON.stringify({ chainId: 'x' })),
      { timeout: 15_000 },
    );
    expect(ServiceError.toServiceError(malformed)).toMatchObject({
      code: 400,
      message: expect.stringMatching(/chainId/),
    });
    expect(await relayerNonce()).toBe(nonceBefore);

    // The same nonce signed twice over different terms: the second copy is a conflict, not a second payment.
    const original = await authorization('buyer');
    expect(await rpc<RelayerSubmitReply>('relayer.submit_authorization', request(original))).toMatchObject({
      ok: true,
    });
    const twin = await authorization('buyer', {
      nonce: original.authorization.nonce,
      valueMicro: PRICE * 2n,
    });
    expect(await rpc<RelayerSubmitReply>('relayer.submit_authorization', request(twin))).toMatchObject({
      ok: false,
      reason: 'authorization_conflict',
    });
  });

  it('an authorization someone else already submitted into escrow is reported as that transfer, once', async () => {
    const signed = await authorization('buyer');
    const a = signed.authorization;
    const tx = await submitTransferAuthorization(
      testSigner('stranger', h.chain.anvil.provider),
      h.chain.usdcAddress,
      {
        authorization: a,
        signature: signed.signature,
      },
    );
    await minedReceipt(tx);
    const nonceBefore = await relayerNonce();
    const reply = await rpc<RelayerSubmitReply>('relayer.submit_authorization', request(signed));
    expect(reply).toMatchObject({
      ok: true,
      status: 'confirmed',
      usedElsewhere: true,
      txHash: tx.hash.toLowerCase(),
    });
    expect(await relayerNonce()).toBe(nonceBefore);
  });

  it('a stuck transaction is re-signed with higher fees on the same relayer nonce; a restart rebroadcasts what was recorded', async () => {
    await setAutomine(h.chain.anvil.provider, false);
    try {
      const signed = await authorization('buyer');
      const transfersBefore = (await transfersIntoEscrow(testWallets.buyer.address)).length;
      const submitted = await rpc<RelayerSubmitReply>('relayer.submit_authorization', request(signed, 0));
      expect(submitted).toMatchObject({ ok: true, status: 'submitted' });
      const row = () =>
        h.db
          .selectFrom('relayed_authorizations')
          .selectAll()
          .where('auth_nonce', '=', signed.authorization.nonce.toLowerCase())
          .executeTakeFirstOrThrow();
      const bumped = await waitFor(async () => ((await row()).fee_bumps >= 1 ? row() : undefined), {
        timeoutMs: 10_000,
        message: 'no fee bump',
      });
      expect(bumped.earlier_tx_hashes).toContain(submitted.ok ? submitted.txHash : '');
      expect(BigInt(bumped.max_fee_per_gas!)).toBeGreaterThan(0n);

      // Crash: the process goes away with the transaction only in the node's pool; the pool forgets it too.
      await h.service.stop();
      const recorded = await row();
      await h.chain.anvil.provider.send('anvil_dropAllTransactions', []);
      await h.start();
      await waitFor(
        async () => (await h.chain.anvil.provider.send('txpool_content', [])) && (await pendingCount()) > 0,
        { timeoutMs: 10_000, message: 'the recorded transaction was not rebroadcast' },
      );
      await mine(h.chain.anvil.provider, 1);
      const done = await waitFor(async () => ((await row()).status === 'confirmed' ? row() : undefined), {
        timeoutMs: 10_000,
      });
      // Every version (bumps, rebroadcasts after the restart) is the same relayer nonce: one of them was mined.
      expect(done.relayer_nonce).toBe(recorded.relayer_nonce);
      expect([done.tx_hash, ...done.earlier_tx_hashes]).toContain(done.settled_tx_hash);
      expect((await transfersIntoEscrow(testWallets.buyer.address)).length).toBe(transfersBefore + 1);
      const again = await rpc<RelayerSubmitReply>('relayer.submit_authorization', request(signed));
      expect(again).toMatchObject({ ok: true, status: 'confirmed', txHash: done.settled_tx_hash });
    } finally {
      await setAutomine(h.chain.anvil.provider, true);
    }
  });

  async function pendingCount(): Promise<number> {
    const content = (await h.chain.anvil.provider.send('txpool_content', [])) as {
      pending: Record<string, Record<string, unknown>>;
    };
    return Object.values(content.pending ?? {}).reduce((n, byNonce) => n + Object.keys(byNonce).length, 0);
  }

  it('below its minimum gas balance the relayer says so and refuses new work', async () => {
    await h.service.stop();
    await h.start({ RELAYER_MIN_BALANCE_WEI: '1000000000000000000000000' });
    const status = await rpc<RelayerStatusReply>('relayer.status', {});
    expect(status).toMatchObject({ available: false, address: testWallets.relayer.address });
    const reply = await rpc<RelayerSubmitReply>(
      'relayer.submit_authorization',
      request(await authorization('buyer')),
    );
    expect(reply).toMatchObject({ ok: false, reason: 'relayer_out_of_gas' });
  });
});
