import { decodePaymentRequired } from '@paygate/protocol';
import type { RunningSettlement } from '@paygate/settlement';
import { mine, setAutomine, testWallets, waitFor } from '@paygate/testing';
import {
  appendPaymentIdentifierToExtensions,
  generatePaymentId,
  validatePaymentIdentifier,
} from '@x402/extensions/payment-identifier';
import { decodePaymentResponseHeader, wrapFetchWithPayment, x402Client } from '@x402/fetch';
import { privateKeyToAccount } from 'viem/accounts';
import { loadConfig, type RunningGateway, startGatewayProxy } from '../src';
import { type Harness, skillSnapshot, startHarness, startUpstream } from './harness';
import { startRelayer, usdcBalanceOf, x402ClientConfig } from './relayer';

jest.setTimeout(120_000);

type Upstream = Awaited<ReturnType<typeof startUpstream>>;

/**
 * One purchase per request with an unmodified `@x402/fetch` (the payment-identifier id added by the hook x402's
 * own example uses), on a chain whose next block comes after the gateway stopped waiting (mining paused): the
 * paid call answers 202 `settlement_pending` with its transaction, never a 402 that would have the client sign
 * again; the same id asked again is the same purchase (same transaction, nothing more charged) and is served once
 * the block is in; the same id for another request is a 409 conflict; and a second gateway on the same database
 * (another replica, or the same one restarted) answers the same.
 */
describe('x402 payment-identifier and settlement_pending: one charge per request', () => {
  let h: Harness;
  let upstream: Upstream;
  let settlement: RunningSettlement;
  let replica: RunningGateway | undefined;
  const network = 'eip155:31337';
  const gatewayEnv = {
    RELAYER_TIMEOUT_MS: '3000',
    RATE_LIMIT_PER_MINUTE: '100000',
    // The gateway waits 800 ms for inclusion; with mining paused no block comes in that time.
    X402_INCLUSION_WAIT_MS: '800',
    X402_RECOVERY_AFTER_MS: '300',
    X402_RECOVERY_INTERVAL_MS: '200',
  };

  beforeAll(async () => {
    h = await startHarness('x402payid', gatewayEnv);
    upstream = await startUpstream();
    settlement = await startRelayer(h);
    await h.publishSkill(skillSnapshot({ name: 'wx', apiBaseUrl: `${upstream.url}/seller` }));
  });

  afterAll(async () => {
    await setAutomine(h.anvil.provider, true).catch(() => undefined);
    await replica?.stop();
    await settlement?.stop();
    await upstream?.close();
    await h?.stop();
  });

  const urlOf = (base: string, path: string) => `${base}/api/v1/skills/wx${path}`;
  const balanceOf = (address: string) => usdcBalanceOf(h, address);
  const relayerNonce = () => h.anvil.provider.getTransactionCount(testWallets.relayer.address, 'latest');

  /** The unmodified `@x402/fetch`, with one payment id for every payment it makes (x402's documented hook). */
  function payingWithId(paymentId: string) {
    const account = privateKeyToAccount(testWallets.buyer.privateKey as `0x${string}`);
    const client = x402Client.fromConfig(x402ClientConfig(h, account));
    client.onBeforePaymentCreation(async ({ paymentRequired }) => {
      paymentRequired.extensions ??= {};
      appendPaymentIdentifierToExtensions(paymentRequired.extensions, paymentId);
    });
    return wrapFetchWithPayment(fetch, client);
  }

  async function pending(res: Response): Promise<string> {
    expect(res.status).toBe(202);
    expect(res.headers.get('retry-after')).toBe('2');
    const settled = decodePaymentResponseHeader(res.headers.get('payment-response')!);
    expect(settled).toMatchObject({ success: false, errorReason: 'settlement_pending', network });
    expect(settled.transaction).toMatch(/^0x[0-9a-f]{64}$/);
    const body = await res.json();
    expect(body.error).toMatchObject({ code: 'settlement_pending', txHash: settled.transaction });
    return settled.transaction;
  }

  it('the 402 declares the payment-identifier extension as @x402/extensions builds it', async () => {
    const res = await fetch(urlOf(h.gateway.url, '/data'));
    expect(res.status).toBe(402);
    const required = decodePaymentRequired(res.headers.get('payment-required')!) as any;
    const declared = required.extensions['payment-identifier'];
    expect(declared.info).toEqual({ required: false });
    expect(validatePaymentIdentifier(declared)).toEqual({ valid: true });
    expect(required.extensions.bazaar).toBeDefined();
  });

  it('pending answers 202 with the transaction; asked again it is the same purchase, served once included: one charge', async () => {
    const pay = payingWithId(generatePaymentId());
    const buyerBefore = await balanceOf(testWallets.buyer.address);
    const escrowBefore = await balanceOf(testWallets.escrow.address);
    const nonceBefore = await relayerNonce();
    const seen = upstream.requests.length;
    await setAutomine(h.anvil.provider, false);
    let txHash: string;
    try {
      txHash = await pending(await pay(urlOf(h.gateway.url, '/data?city=oslo')));
      // Asked again before any block: the client signed a new authorization, which is never submitted.
      expect(await pending(await pay(urlOf(h.gateway.url, '/data?city=oslo')))).toBe(txHash);
      expect(upstream.requests.length).toBe(seen);
      await mine(h.anvil.provider, 1);
    } finally {
      await setAutomine(h.anvil.provider, true);
    }
    const served = await pay(urlOf(h.gateway.url, '/data?city=oslo'));
    expect(served.status).toBe(200);
    expect(decodePaymentResponseHeader(served.headers.get('payment-response')!)).toMatchObject({
      success: true,
      transaction: txHash,
    });
    expect(upstream.requests.length - seen).toBe(1);
    expect(await balanceOf(testWallets.buyer.address)).toBe(buyerBefore - 50_000n);
    expect(await balanceOf(testWallets.escrow.address)).toBe(escrowBefore + 50_000n);
    expect(await relayerNonce()).toBe(nonceBefore + 1);

    // Once served, the same id for the same request is never charged again, and says so (not a 402).
    const again = await pay(urlOf(h.gateway.url, '/data?city=oslo'));
    expect(again.status).toBe(409);
    expect((await again.json()).error.code).toBe('payment_identifier_served');
    // The same id for another request: a conflict, nothing charged.
    const other = await pay(urlOf(h.gateway.url, '/data?city=bergen'));
    expect(other.status).toBe(409);
    expect((await other.json()).error.code).toBe('payment_identifier_conflict');
    expect(await balanceOf(testWallets.buyer.address)).toBe(buyerBefore - 50_000n);
    expect(upstream.requests.length - seen).toBe(1);
  });

  it('a second gateway on the same database answers the same: pending on one, served by the other, one charge', async () => {
    replica = await startGatewayProxy(
      loadConfig(
        h.env.envFor('gateway-proxy', {
          CHAIN_RPC_URL: h.anvil.rpcUrl,
          CHAIN_NETWORK: 'local',
          USDC_ADDRESS: h.usdcAddress,
          ESCROW_ADDRESS: testWallets.escrow.address,
          PUBLIC_BASE_URL: 'http://paygate.test',
          ...gatewayEnv,
        }),
      ),
    );
    const other = replica;
    await waitFor(() => other.state.x402.offered(), { timeoutMs: 10_000, message: 'x402 never offered' });
    const pay = payingWithId(generatePaymentId('agent_'));
    const buyerBefore = await balanceOf(testWallets.buyer.address);
    const seen = upstream.requests.length;
    await setAutomine(h.anvil.provider, false);
    let txHash: string;
    try {
      txHash = await pending(await pay(urlOf(h.gateway.url, '/data?city=rome')));
      expect(await pending(await pay(urlOf(other.url, '/data?city=rome')))).toBe(txHash);
      await mine(h.anvil.provider, 1);
    } finally {
      await setAutomine(h.anvil.provider, true);
    }
    const conflict = await pay(urlOf(other.url, '/data?city=paris'));
    expect(conflict.status).toBe(409);
    expect((await conflict.json()).error.code).toBe('payment_identifier_conflict');
    const served = await pay(urlOf(other.url, '/data?city=rome'));
    expect(served.status).toBe(200);
    expect(decodePaymentResponseHeader(served.headers.get('payment-response')!).transaction).toBe(txHash);
    expect(upstream.requests.length - seen).toBe(1);
    expect(await balanceOf(testWallets.buyer.address)).toBe(buyerBefore - 50_000n);
  });
});
