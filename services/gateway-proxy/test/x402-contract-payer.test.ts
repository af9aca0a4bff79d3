/**
 * A contract payer cannot spend a seller's relayer budget, and a contract's signature is never a 500: with the real
 * registry (seller keys), settlement's relayer and anvil, through the facilitator's /verify and /settle.
 *
 *   npx jest --ci services/gateway-proxy/test/x402-contract-payer.test.ts
 */
import { TRANSFER_WITH_AUTHORIZATION_TYPES, usdcEip712Domain } from '@paygate/chain';
import { loadConfig as loadRegistryConfig, startRegistry } from '@paygate/registry';
import type { StartedService } from '@paygate/runtime';
import type { RunningSettlement } from '@paygate/settlement';
import {
  deployFreeGasWallet,
  signTransferAuthorization,
  signUpSeller,
  testSigner,
  testWallets,
} from '@paygate/testing';
import { getBytes, TypedDataEncoder, Wallet } from 'ethers';
import { type Harness, startHarness } from './harness';
import { startRelayer } from './relayer';

jest.setTimeout(120_000);

const NETWORK = 'eip155:31337';
const PER_PAYER_PER_DAY = 2;
const PER_SELLER_PER_DAY = 3;
const VALUE = 10_000n;

describe('x402 contract payers: the seller budget counts only what was relayed, signatures are never a 500', () => {
  let h: Harness;
  let registry: StartedService;
  let settlement: RunningSettlement;

  beforeAll(async () => {
    h = await startHarness('x402contractpayer', {
      RATE_LIMIT_PER_MINUTE: '100000',
      X402_FACILITATOR_PER_MINUTE: '1000',
      RELAYER_DAILY_PER_PAYER: String(PER_PAYER_PER_DAY),
      RELAYER_DAILY_PER_SELLER: String(PER_SELLER_PER_DAY),
    });
    registry = await startRegistry(
      loadRegistryConfig(h.env.envFor('registry', { PUBLIC_BASE_URL: 'http://paygate.test' })),
    );
    settlement = await startRelayer(h);
  });

  afterAll(async () => {
    await settlement?.stop();
    await registry?.stop();
    await h?.stop();
  });

  const relayerNonce = () => h.anvil.provider.getTransactionCount(testWallets.relayer.address, 'latest');
  const newSellerKey = async () =>
    (await signUpSeller(registry.url, Wallet.createRandom().privateKey)).apiKey;
  /** Owns the contract wallets (anvil funds it with ETH) and signs for them. */
  const owner = () => testSigner('stranger', h.anvil.provider);

  /** A contract wallet of the owner's with 1 USDC; `paidGasToo` false: it approves only at gas price 0. */
  async function contractPayer(paidGasToo: boolean): Promise<string> {
    const wallet = await deployFreeGasWallet(owner(), testWallets.stranger.address, paidGasToo);
    await h.transfer('buyer', 1_000_000n, { to: wallet });
    return wallet;
  }

  async function eoaPayer(): Promise<Wallet> {
    const payer = new Wallet(Wallet.createRandom().privateKey);
    await h.transfer('buyer', 1_000_000n, { to: payer.address });
    return payer;
  }

  async function facilitatorBody(
    signer: Wallet,
    from?: string,
    signature?: (signed: string, digest: string) => Promise<string>,
  ) {
    const signed = await signTransferAuthorization(signer, {
      chainId: 31337,
      usdcAddress: h.usdcAddress,
      to: testWallets.escrow.address,
      valueMicro: VALUE,
      from,
    });
    if (signature) {
      const digest = TypedDataEncoder.hash(
        usdcEip712Domain({ chainId: 31337, usdcAddress: h.usdcAddress }),
        TRANSFER_WITH_AUTHORIZATION_TYPES as unknown as Record<string, Array<{ name: string; type: string }>>,
        signed.authorization,
      );
      signed.signature = await signature(signed.signature, digest);
    }
    const paymentRequirements = {
      scheme: 'exact',
      network: NETWORK,
      asset: h.usdcAddress,
      payTo: testWallets.escrow.address,
      amount: VALUE.toString(),
      maxTimeoutSeconds: 60,
      extra: { name: 'USD Coin', version: '2' },
    };
    return {
      x402Version: 2,
      paymentPayload: { x402Version: 2, accepted: paymentRequirements, payload: signed },
      paymentRequirements,
    };
  }

  const call = (path: 'verify' | 'settle', key: string, body: unknown) =>
    fetch(`${h.gateway.url}/api/v1/x402/${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });

  const withV = (signature: string, v: number) =>
    `${signature.slice(0, 130)}${v.toString(16).padStart(2, '0')}`;

  it("payers the relayer refuses (a wallet that approves only at gas price 0) do not spend the seller's daily budget", async () => {
    const key = await newSellerKey();
    const nonceBefore = await relayerNonce();
    // More refused settles than the seller's budget, each payer within its own.
    for (let round = 0; round < 2; round++) {
      const wallet = await contractPayer(false);
      for (let i = 0; i < PER_PAYER_PER_DAY; i++) {
        const body = await facilitatorBody(owner(), wallet);
        // /verify asks the wallet at gas price 0: it says yes.
        expect(await (await call('verify', key, body)).json()).toMatchObject({ isValid: true });
        const settle = await call('settle', key, body);
        expect(settle.status).toBe(200);
        expect(await settle.json()).toMatchObject({
          success: false,
          errorReason: 'invalid_exact_evm_signature',
          transaction: '',
        });
      }
    }
    // Nothing was sent for them; the seller's honest buyers are still relayed, up to its whole budget.
    expect(await relayerNonce()).toBe(nonceBefore);
    for (let i = 0; i < PER_SELLER_PER_DAY; i++) {
      const honest = await call('settle', key, await facilitatorBody(await eoaPayer()));
      expect(await honest.json()).toMatchObject({ success: true });
    }
    const over = await call('settle', key, await facilitatorBody(await eoaPayer()));
    expect(over.status).toBe(429);
  });

  it("a contract's signature with v 0/1 or Safe's 31/32 settles; an EOA's odd v and bytes that are not whole are refused at /verify by name", async () => {
    const key = await newSellerKey();
    const wallet = await contractPayer(true);
    const compact = await facilitatorBody(owner(), wallet, async (signed) =>
      withV(signed, Number.parseInt(signed.slice(130), 16) - 27),
    );
    expect(await (await call('verify', key, compact)).json()).toMatchObject({ isValid: true });
    const compactSettle = await call('settle', key, compact);
    expect(compactSettle.status).toBe(200);
    expect(await compactSettle.json()).toMatchObject({ success: true });

    const safe = await facilitatorBody(owner(), wallet, async (_signed, digest) => {
      const ethSigned = await owner().signMessage(getBytes(digest));
      return withV(ethSigned, Number.parseInt(ethSigned.slice(130), 16) + 4);
    });
    expect(await (await call('verify', key, safe)).json()).toMatchObject({ isValid: true });
    const safeSettle = await call('settle', key, safe);
    expect(safeSettle.status).toBe(200);
    expect(await safeSettle.json()).toMatchObject({ success: true });

    // An EOA's signature must be what the token's ecrecover takes: v 27/28 (or 0/1), nothing else.
    const eoa = await eoaPayer();
    const oddV = await facilitatorBody(eoa, undefined, async (signed) =>
      withV(signed, Number.parseInt(signed.slice(130), 16) + 4),
    );
    const oddVerify = await call('verify', key, oddV);
    expect(oddVerify.status).toBe(200);
    expect(await oddVerify.json()).toMatchObject({
      isValid: false,
      invalidReason: 'invalid_exact_evm_signature',
    });
    const eoaCompact = await facilitatorBody(eoa, undefined, async (signed) =>
      withV(signed, Number.parseInt(signed.slice(130), 16) - 27),
    );
    expect(await (await call('settle', key, eoaCompact)).json()).toMatchObject({ success: true });

    // Half a byte short: refused by name on /verify and /settle, for a contract payer and an EOA; nothing sent.
    const nonceBefore = await relayerNonce();
    for (const body of [
      await facilitatorBody(owner(), wallet, async (signed) => signed.slice(0, 131)),
      await facilitatorBody(eoa, undefined, async (signed) => signed.slice(0, 131)),
    ]) {
      const verify = await call('verify', key, body);
      expect(verify.status).toBe(200);
      expect(await verify.json()).toMatchObject({
        isValid: false,
        invalidReason: 'invalid_exact_evm_signature',
        invalidMessage: expect.stringMatching(/whole bytes/),
      });
      const settle = await call('settle', key, body);
      expect(settle.status).toBe(200);
      expect(await settle.json()).toMatchObject({
        success: false,
        errorReason: 'invalid_exact_evm_signature',
      });
    }
    expect(await relayerNonce()).toBe(nonceBefore);
  });
});
