/**
 * The relayer's gas is not burnt for a payer contract: the simulation runs with the fees the transaction carries
 * (a wallet that says yes only at gas price 0 is refused before anything is sent); a payer whose relayed
 * transaction reverted on chain is refused afterwards, and so is its contract code at any other address (its code
 * hash) once a given number of distinct payers of it reverted, persisted; a contract's signature bytes are submitted as signed, whatever its `v`, and a signature the
 * token cannot take is refused by name, never an error.
 *
 *   npx jest --ci services/settlement/test/relayer-contract-payers.test.ts
 */
import { TRANSFER_WITH_AUTHORIZATION_TYPES, usdcAbi, usdcEip712Domain } from '@paygate/chain';
import type { RelayerSubmitReply, RelayerSubmitRequest, TransferAuthorization } from '@paygate/contracts';
import {
  deployFreeGasWallet,
  mine,
  setAcceptsPaidGas,
  setAutomine,
  signTransferAuthorization,
  testSigner,
  testWallets,
  waitFor,
} from '@paygate/testing';
import { Contract, getBytes, TypedDataEncoder, type Wallet } from 'ethers';
import { useSettlementHarness } from './harness';

jest.setTimeout(120_000);

const encoder = new TextEncoder();
const decoder = new TextDecoder();
const PRICE = 50_000n; // 0.05 USDC
const GWEI = 1_000_000_000n;

describe('x402 relayer: contract payers cannot burn its gas', () => {
  const h = useSettlementHarness('relayerpayers', {
    escrowFunds: null,
    buyerFunds: '100',
    overrides: {
      RELAYER_PRIVATE_KEY: testWallets.relayer.privateKey,
      TRANSFER_POLL_INTERVAL_MS: '100',
      RELAYER_CODE_HASH_REFUSAL_PAYERS: '2',
    },
  });
  const escrow = testWallets.escrow.address;
  /** Owns the contract wallets (anvil funds it with ETH) and signs their authorizations. */
  const owner = () => testSigner('stranger', h.chain.anvil.provider);

  async function rpc<T>(subject: string, body: unknown, timeoutMs = 20_000): Promise<T> {
    const reply = await h.bus.nc.request(h.bus.rpcSubject(subject), encoder.encode(JSON.stringify(body)), {
      timeout: timeoutMs,
    });
    return JSON.parse(decoder.decode(reply.data)) as T;
  }

  const relayerNonce = () =>
    h.chain.anvil.provider.getTransactionCount(testWallets.relayer.address, 'latest');

  /** A contract wallet of the owner's holding 1 USDC (sent by the buyer). */
  async function fundedWallet(paidGasToo: boolean): Promise<string> {
    const wallet = await deployFreeGasWallet(owner(), testWallets.stranger.address, paidGasToo);
    const usdc = new Contract(h.chain.usdcAddress, usdcAbi, testSigner('buyer', h.chain.anvil.provider));
    await (await usdc.getFunction('transfer')(wallet, 1_000_000n)).wait();
    return wallet;
  }

  const sign = (signer: Wallet, from?: string) =>
    signTransferAuthorization(signer, {
      chainId: h.chain.anvil.chainId,
      usdcAddress: h.chain.usdcAddress,
      to: escrow,
      valueMicro: PRICE,
      from,
    });

  const submission = (
    signed: { authorization: TransferAuthorization; signature: string },
    waitForReceiptMs = 10_000,
  ): RelayerSubmitRequest => ({
    chainId: h.chain.anvil.chainId,
    token: h.chain.usdcAddress,
    authorization: signed.authorization,
    signature: signed.signature,
    waitForReceiptMs,
  });

  const submit = (signed: { authorization: TransferAuthorization; signature: string }, waitMs = 10_000) =>
    rpc<RelayerSubmitReply>('relayer.submit_authorization', submission(signed, waitMs));

  /** The row of an authorization once it is finished. */
  const finishedRow = (nonce: string) =>
    waitFor(
      async () => {
        const row = await h.db
          .selectFrom('relayed_authorizations')
          .selectAll()
          .where('auth_nonce', '=', nonce.toLowerCase())
          .executeTakeFirst();
        return row && ['confirmed', 'failed', 'used_elsewhere'].includes(row.status) ? row : undefined;
      },
      { timeoutMs: 20_000, message: 'the relayed authorization was not finished' },
    );

  /**
   * Submits without waiting while blocks are not mined, has `between` run with a higher priority fee (ordered
   * before the relayer's transaction in the block), then mines the block: a passed simulation, then a revert.
   */
  async function revertAfterSimulation(
    signed: { authorization: TransferAuthorization; signature: string },
    between: (fees: {
      maxPriorityFeePerGas: bigint;
      maxFeePerGas: bigint;
      gasLimit: bigint;
    }) => Promise<unknown>,
  ) {
    await setAutomine(h.chain.anvil.provider, false);
    try {
      const reply = await submit(signed, 0);
      expect(reply).toMatchObject({ ok: true, status: 'submitted' });
      // A gas limit of its own: an estimate would run on the pending block, after the relayer's transaction.
      await between({ maxPriorityFeePerGas: 500n * GWEI, maxFeePerGas: 1000n * GWEI, gasLimit: 300_000n });
      await mine(h.chain.anvil.provider, 1);
    } finally {
      await setAutomine(h.chain.anvil.provider, true);
    }
    return finishedRow(signed.authorization.nonce);
  }

  it('a wallet that approves only at gas price 0 is refused by the simulation: nothing is sent, no gas spent', async () => {
    const wallet = await fundedWallet(false);
    const nonceBefore = await relayerNonce();
    const ethBefore = await h.chain.anvil.provider.getBalance(testWallets.relayer.address);
    const reply = await submit(await sign(owner(), wallet));
    expect(reply).toMatchObject({ ok: false, reason: 'invalid_signature' });
    expect(await relayerNonce()).toBe(nonceBefore);
    expect(await h.chain.anvil.provider.getBalance(testWallets.relayer.address)).toBe(ethBefore);
    expect(await h.chain.balanceOf(wallet)).toBe(1_000_000n);
    expect(await h.db.selectFrom('relayed_authorizations').select('id').execute()).toHaveLength(0);
  });

  it("a contract's signature is submitted as signed, whatever its v (0/1, Safe's 31/32); an EOA's 0/1 is normalised; a v the token refuses is refused by name", async () => {
    const wallet = await fundedWallet(true);
    const withV = (signature: string, v: number) =>
      `${signature.slice(0, 130)}${v.toString(16).padStart(2, '0')}`;

    const compact = await sign(owner(), wallet);
    const v = Number.parseInt(compact.signature.slice(130), 16);
    const compactReply = await submit({ ...compact, signature: withV(compact.signature, v - 27) });
    expect(compactReply).toMatchObject({ ok: true, status: 'confirmed' });

    // Safe's eth_sign form: the owner's personal_sign of the EIP-712 digest, v + 4.
    const safe = await sign(owner(), wallet);
    const digest = TypedDataEncoder.hash(
      usdcEip712Domain({ chainId: h.chain.anvil.chainId, usdcAddress: h.chain.usdcAddress }),
      TRANSFER_WITH_AUTHORIZATION_TYPES as unknown as Record<string, Array<{ name: string; type: string }>>,
      safe.authorization,
    );
    const ethSigned = await owner().signMessage(getBytes(digest));
    const safeV = Number.parseInt(ethSigned.slice(130), 16) + 4;
    const safeReply = await submit({ ...safe, signature: withV(ethSigned, safeV) });
    expect(safeReply).toMatchObject({ ok: true, status: 'confirmed' });
    expect(await h.chain.balanceOf(wallet)).toBe(1_000_000n - 2n * PRICE);

    // An EOA (no code): v 0/1 is v 27/28 (what the token's ecrecover takes); anything else is not a signature.
    const buyer = testSigner('buyer', h.chain.anvil.provider);
    const eoa = await sign(buyer);
    const eoaV = Number.parseInt(eoa.signature.slice(130), 16);
    expect(await submit({ ...eoa, signature: withV(eoa.signature, eoaV - 27) })).toMatchObject({
      ok: true,
      status: 'confirmed',
    });
    const nonceBefore = await relayerNonce();
    const odd = await sign(buyer);
    expect(await submit({ ...odd, signature: withV(odd.signature, eoaV + 4) })).toMatchObject({
      ok: false,
      reason: 'invalid_signature',
    });
    const short = await sign(buyer);
    expect(await submit({ ...short, signature: short.signature.slice(0, 129) })).toMatchObject({
      ok: false,
      reason: 'invalid_signature',
    });
    expect(await submit({ ...short, signature: short.signature.slice(0, 128) })).toMatchObject({
      ok: false,
      reason: 'invalid_signature',
    });
    expect(await relayerNonce()).toBe(nonceBefore);
  });

  it('a revert explained by the payer spending its balance first refuses that payer, not every wallet of its code', async () => {
    const drained = await fundedWallet(true);
    const signed = await sign(owner(), drained);
    // The wallet's whole balance leaves first, by another authorization of its owner's sent straight to the token.
    const away = await signTransferAuthorization(owner(), {
      chainId: h.chain.anvil.chainId,
      usdcAddress: h.chain.usdcAddress,
      to: testWallets.buyer.address,
      valueMicro: 1_000_000n,
      from: drained,
    });
    const row = await revertAfterSimulation(signed, async (fees) => {
      const usdc = new Contract(
        h.chain.usdcAddress,
        [
          'function transferWithAuthorization(address from, address to, uint256 value, uint256 validAfter, uint256 validBefore, bytes32 nonce, bytes signature)',
        ],
        testSigner('buyer', h.chain.anvil.provider),
      );
      const a = away.authorization;
      return usdc.getFunction('transferWithAuthorization')(
        a.from,
        a.to,
        a.value,
        a.validAfter,
        a.validBefore,
        a.nonce,
        away.signature,
        fees,
      );
    });
    expect(row).toMatchObject({ status: 'failed' });

    const again = await fundedWallet(true);
    const usdc = new Contract(h.chain.usdcAddress, usdcAbi, testSigner('buyer', h.chain.anvil.provider));
    await (await usdc.getFunction('transfer')(drained, 1_000_000n)).wait();
    const refused = await submit(await sign(owner(), drained));
    expect(refused).toMatchObject({ ok: false, message: expect.stringMatching(/reverted on chain/) });
    // Another wallet of the same code is still relayed: the code did not change its mind, the balance moved.
    expect(await submit(await sign(owner(), again))).toMatchObject({ ok: true, status: 'confirmed' });
  });

  it('after a revert on chain the payer is refused; its code only once a second payer of it reverted, across a restart; others are not', async () => {
    const wallet = await fundedWallet(true);
    const row = await revertAfterSimulation(await sign(owner(), wallet), (fees) =>
      setAcceptsPaidGas(owner(), wallet, false, fees),
    );
    expect(row).toMatchObject({ status: 'failed' });
    expect(await h.chain.balanceOf(wallet)).toBe(1_000_000n);
    await (await setAcceptsPaidGas(owner(), wallet, true)).wait();

    let nonceBefore = await relayerNonce();
    const samePayer = await submit(await sign(owner(), wallet));
    expect(samePayer).toMatchObject({
      ok: false,
      reason: 'transaction_failed',
      message: expect.stringMatching(new RegExp(`${wallet.toLowerCase()}.*reverted on chain`)),
    });
    expect(await relayerNonce()).toBe(nonceBefore);
    // One wallet is one payer: another wallet of the same code (one Safe beside another) is still relayed.
    const sibling = await fundedWallet(true);
    expect(await submit(await sign(owner(), sibling))).toMatchObject({ ok: true, status: 'confirmed' });

    // A second payer of that code reverting the same way (RELAYER_CODE_HASH_REFUSAL_PAYERS=2) refuses the code.
    const second = await fundedWallet(true);
    const secondRow = await revertAfterSimulation(await sign(owner(), second), (fees) =>
      setAcceptsPaidGas(owner(), second, false, fees),
    );
    expect(secondRow).toMatchObject({ status: 'failed' });
    nonceBefore = await relayerNonce();
    const redeployed = await fundedWallet(true);
    const sameCode = await submit(await sign(owner(), redeployed));
    expect(sameCode).toMatchObject({
      ok: false,
      reason: 'transaction_failed',
      message: expect.stringMatching(/code hash 0x[0-9a-f]{64}/),
    });
    expect(await relayerNonce()).toBe(nonceBefore);
    expect(await h.chain.balanceOf(redeployed)).toBe(1_000_000n);

    // Persisted: a restarted relayer refuses them too; an honest EOA payer is relayed as before.
    await h.service.stop();
    await h.start();
    expect(await submit(await sign(owner(), wallet))).toMatchObject({
      ok: false,
      reason: 'transaction_failed',
    });
    expect(await submit(await sign(owner(), redeployed))).toMatchObject({
      ok: false,
      reason: 'transaction_failed',
    });
    expect(await relayerNonce()).toBe(nonceBefore);
    const honest = await submit(await sign(testSigner('buyer', h.chain.anvil.provider)));
    expect(honest).toMatchObject({ ok: true, status: 'confirmed' });
  });
});
