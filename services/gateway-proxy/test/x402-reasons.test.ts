/**
 * x402's reason codes: every code Paygate answers is `@x402/evm`'s own (read from the installed
 * package) or the x402 specification's, except the few Paygate-only ones; and every named check of the exact EVM
 * scheme answers its code, through the facilitator's /verify (real registry, anvil, Postgres, NATS).
 *
 *   npx jest --ci services/gateway-proxy/test/x402-reasons.test.ts
 */
import { readFileSync } from 'node:fs';
import { encodeX402Header } from '@paygate/protocol';
import { loadConfig as loadRegistryConfig, startRegistry } from '@paygate/registry';
import type { StartedService } from '@paygate/runtime';
import { signTransferAuthorization, signUpSeller, testSigner, testWallets, waitFor } from '@paygate/testing';
import { Wallet } from 'ethers';
import { ErrorReasons } from 'x402/types';
import { PAYGATE_REASONS, UPSTREAM_REASONS } from '../src/reasons';
import { EXACT_EVM_CHECKS } from '../src/x402/mechanisms/exact-evm/verify';
import { type Harness, relayStraightToToken, skillSnapshot, startHarness, startUpstream } from './harness';

jest.setTimeout(120_000);

/** The `Err… = "…"` constants `@x402/evm` bundles into its exact facilitators (v2 and v1), as installed. */
function installedEvmReasons(): Set<string> {
  const codes = new Set<string>();
  for (const entry of ['@x402/evm/exact/facilitator', '@x402/evm/exact/v1/facilitator']) {
    const source = readFileSync(require.resolve(entry), 'utf8');
    for (const match of source.matchAll(/\bvar Err\w+ = "([a-z0-9_]+)"/g)) codes.add(match[1]!);
  }
  return codes;
}

describe('x402 reason codes are upstream names', () => {
  const evm = installedEvmReasons();
  const spec = new Set<string>(ErrorReasons);
  const { payload, paymentRequirements, ...fromEvm } = UPSTREAM_REASONS;

  it('names every @x402/evm code exactly as the installed @x402/evm returns it', () => {
    expect(evm.size).toBeGreaterThan(20);
    for (const code of Object.values(fromEvm)) expect([code, evm.has(code)]).toEqual([code, true]);
  });

  it("takes the transport's codes from x402's standard ErrorReasons", () => {
    for (const code of [payload, paymentRequirements]) expect([code, spec.has(code)]).toEqual([code, true]);
  });

  it('keeps a Paygate-only code only where upstream has none', () => {
    for (const code of Object.values(PAYGATE_REASONS)) {
      expect([code, evm.has(code) || spec.has(code)]).toEqual([code, false]);
    }
  });
});

describe('x402: every named exact EVM check answers its upstream reason code', () => {
  const NETWORK = 'eip155:31337';
  let h: Harness;
  let registry: StartedService;
  let apiKey: string;
  let upstream: Awaited<ReturnType<typeof startUpstream>>;

  beforeAll(async () => {
    h = await startHarness('x402reasons', {
      RATE_LIMIT_PER_MINUTE: '100000',
      X402_FACILITATOR_PER_MINUTE: '1000',
    });
    registry = await startRegistry(
      loadRegistryConfig(h.env.envFor('registry', { PUBLIC_BASE_URL: 'http://paygate.test' })),
    );
    apiKey = (await signUpSeller(registry.url, testWallets.seller.privateKey)).apiKey;
    upstream = await startUpstream();
    const base = skillSnapshot({ name: 'cheapx', apiBaseUrl: `${upstream.url}/seller` });
    await h.publishSkill({ ...base, endpoints: base.endpoints.map((e) => ({ ...e, price: '0.001' })) });
    await waitFor(() => h.gateway.state.x402.knownTokenDomain(), {
      timeoutMs: 10_000,
      message: 'no token domain',
    });
  });

  afterAll(async () => {
    await upstream?.close();
    await registry?.stop();
    await h?.stop();
  });

  const now = () => Math.floor(Date.now() / 1000);
  const requirements = (amount = '10000') => ({
    scheme: 'exact',
    network: NETWORK,
    asset: h.usdcAddress,
    payTo: testWallets.escrow.address,
    amount,
    maxTimeoutSeconds: 60,
    extra: { name: 'USD Coin', version: '2' },
  });

  interface Variant {
    signer?: Wallet;
    from?: string;
    to?: string;
    valueMicro?: bigint;
    validAfter?: number;
    validBefore?: number;
    accepted?: Record<string, unknown>;
  }

  async function signed(v: Variant = {}) {
    return signTransferAuthorization(v.signer ?? testSigner('buyer', h.anvil.provider), {
      chainId: 31337,
      usdcAddress: h.usdcAddress,
      from: v.from,
      to: v.to ?? testWallets.escrow.address,
      valueMicro: v.valueMicro ?? 10_000n,
      validAfter: v.validAfter,
      validBefore: v.validBefore,
    });
  }

  /** A facilitator VerifyRequest for the buyer's authorization, with the variant's one flaw. */
  async function verifyBody(v: Variant = {}) {
    const paymentRequirements = requirements();
    return {
      x402Version: 2,
      paymentPayload: {
        x402Version: 2,
        accepted: { ...paymentRequirements, ...v.accepted },
        payload: await signed(v),
      },
      paymentRequirements,
    };
  }

  const verify = async (body: unknown) => {
    const res = await fetch(`${h.gateway.url}/api/v1/x402/verify`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    expect(res.status).toBe(200);
    return (await res.json()) as { isValid: boolean; invalidReason?: string };
  };

  /** An authorization the stranger relayed straight to the token: used on chain, never seen by Paygate. */
  async function usedOnChain() {
    const body = await verifyBody();
    const { authorization, signature } = body.paymentPayload.payload;
    await relayStraightToToken(h, authorization, signature);
    return body;
  }

  /** The one check a facilitator request cannot reach (its requirements are refused first): a paid skill's. */
  async function belowMinimumOnPaidRoute(): Promise<string> {
    const payment = await signed({ valueMicro: 1_000n });
    const header = encodeX402Header({
      x402Version: 2,
      accepted: requirements('1000'),
      payload: payment,
    });
    const res = await fetch(`${h.gateway.url}/api/v1/skills/cheapx/data`, {
      headers: { 'PAYMENT-SIGNATURE': header },
    });
    expect(res.status).toBe(402);
    return (await res.json()).reason;
  }

  const R = UPSTREAM_REASONS;
  const cases: Array<[string, () => Promise<string | undefined>, string]> = [
    [
      'scheme is exact',
      async () => (await verify(await verifyBody({ accepted: { scheme: 'upto' } }))).invalidReason,
      R.scheme,
    ],
    [
      'network is this chain',
      async () => (await verify(await verifyBody({ accepted: { network: 'eip155:8453' } }))).invalidReason,
      R.networkMismatch,
    ],
    [
      'recipient is payTo',
      async () => (await verify(await verifyBody({ to: testWallets.stranger.address }))).invalidReason,
      R.recipientMismatch,
    ],
    [
      'value is the price',
      async () => (await verify(await verifyBody({ valueMicro: 20_000n }))).invalidReason,
      R.valueMismatch,
    ],
    ['value is at least the relaying minimum', belowMinimumOnPaidRoute, R.authorizationValue],
    [
      'validBefore is within maxTimeoutSeconds',
      async () => (await verify(await verifyBody({ validBefore: now() + 3600 }))).invalidReason,
      R.validBefore,
    ],
    [
      'validBefore leaves time to mine',
      async () => (await verify(await verifyBody({ validBefore: now() + 2 }))).invalidReason,
      R.validBefore,
    ],
    [
      'validAfter has passed',
      async () => (await verify(await verifyBody({ validAfter: now() + 600 }))).invalidReason,
      R.validAfter,
    ],
    [
      'signature is whole bytes',
      async () => {
        const body = await verifyBody();
        const { signature } = body.paymentPayload.payload;
        body.paymentPayload.payload.signature = signature.slice(0, 131);
        return (await verify(body)).invalidReason;
      },
      R.signature,
    ],
    [
      "signature is the payer's",
      async () =>
        (
          await verify(
            await verifyBody({
              signer: testSigner('stranger', h.anvil.provider),
              from: testWallets.buyer.address,
            }),
          )
        ).invalidReason,
      R.signature,
    ],
    [
      'payer holds the value',
      async () =>
        (await verify(await verifyBody({ signer: new Wallet(Wallet.createRandom().privateKey) })))
          .invalidReason,
      R.insufficientBalance,
    ],
    ['nonce is unused', async () => (await verify(await usedOnChain())).invalidReason, R.nonceAlreadyUsed],
  ];

  it('covers every named check', () => {
    expect(cases.map(([name]) => name).sort()).toEqual(EXACT_EVM_CHECKS.map((check) => check.name).sort());
  });

  it.each(cases)('%s: refused with its reason', async (_name, attempt, reason) => {
    expect(await attempt()).toBe(reason);
  });

  it('the same authorization without its flaw is valid (each refusal above is about its one flaw)', async () => {
    expect(await verify(await verifyBody())).toEqual(expect.objectContaining({ isValid: true }));
  });

  it("the payer's own signature made malleable (s in the upper half, v flipped) is refused, as the token refuses it", async () => {
    const body = await verifyBody();
    const { signature } = body.paymentPayload.payload;
    const n = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;
    const s = BigInt(`0x${signature.slice(66, 130)}`);
    const v = Number.parseInt(signature.slice(130, 132), 16);
    const flipped = `${signature.slice(0, 66)}${(n - s).toString(16).padStart(64, '0')}${(v === 27 ? 28 : 27).toString(16)}`;
    const malleable = {
      ...body,
      paymentPayload: {
        ...body.paymentPayload,
        payload: { ...body.paymentPayload.payload, signature: flipped },
      },
    };
    expect(await verify(malleable)).toMatchObject({ isValid: false, invalidReason: R.signature });
  });

  it("refuses requirements Paygate does not settle: another asset (Paygate's own code), no amount, another scheme", async () => {
    const body = await verifyBody();
    const withRequirements = (change: Record<string, unknown>) => ({
      ...body,
      paymentRequirements: { ...body.paymentRequirements, ...change },
    });
    expect((await verify(withRequirements({ asset: testWallets.platform.address }))).invalidReason).toBe(
      PAYGATE_REASONS.assetMismatch,
    );
    expect((await verify(withRequirements({ amount: '0' }))).invalidReason).toBe(R.paymentRequirements);
    expect((await verify(withRequirements({ scheme: 'upto' }))).invalidReason).toBe(R.scheme);
    expect((await verify({ ...body, paymentPayload: { x402Version: 2 } })).invalidReason).toBe(R.payload);
  });
});
