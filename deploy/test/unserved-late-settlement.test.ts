/**
 * Charged means served, or refunded, also when the payment is settled after its caller stopped waiting: an x402
 * payment whose transfer is not included within the gateway's wait is answered 202 settlement_pending, the
 * recovery pass claims it once included (kept for a retry of the same resource), and the buyer never presents it
 * again. Nothing was ever forwarded to the seller, so no seller failure was reported; when the retry window closes
 * the ledger still refunds the payer once: the USDC is back on chain, the seller hears of it by webhook, the agent's
 * lookup says refunded, reconciliation stays at 0. All services on real Postgres, NATS and anvil.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { encodeX402Header } from '@paygate/gateway-proxy';
import {
  createActiveSkill,
  mine,
  openSchema,
  setAutomine,
  signTransferAuthorization,
  signUpSeller,
  testSigner,
  testWallets,
  waitFor,
} from '@paygate/testing';
import { Wallet } from 'ethers';
import { sql } from 'kysely';
import { startEdge } from '../dev/edge';
import { type AllServices, startAllServices } from './all-services';
import { expectRefundedOnce } from './fixtures/refunded-once';

jest.setTimeout(180_000);

const OPERATOR_TOKEN = 'unserved-late-settlement-operator-token';
const NETWORK = 'eip155:31337';
const RETRY_WINDOW_SECONDS = 4;

interface Lookup {
  transactionId: string;
  outcome: string;
  refundTxHash: string | null;
  refundReason: string | null;
}

describe('an x402 payment settled after its caller gave up, never presented again, is refunded once', () => {
  let all: AllServices;
  let edge: http.Server;
  let upstream: http.Server;
  let baseUrl: string;
  const skill = `late-${Date.now().toString(36)}`;
  const hooks: Array<Record<string, unknown>> = [];
  const upstreamCalls: string[] = [];

  beforeAll(async () => {
    const upstreams: Record<string, string> = {};
    edge = await startEdge({ port: 0, upstreams });
    baseUrl = `http://127.0.0.1:${(edge.address() as AddressInfo).port}`;
    all = await startAllServices({
      label: 'unservedlate',
      operatorToken: OPERATOR_TOKEN,
      publicBaseUrl: baseUrl,
      extra: {
        'gateway-proxy': {
          RATE_LIMIT_PER_MINUTE: '100000',
          RETRY_WINDOW_SECONDS: String(RETRY_WINDOW_SECONDS),
          X402_INCLUSION_WAIT_MS: '500',
          X402_RECOVERY_AFTER_MS: '300',
          X402_RECOVERY_INTERVAL_MS: '200',
        },
        'escrow-ledger': { UNSERVED_SWEEP_INTERVAL_MS: '500' },
        settlement: { RELAYER_PRIVATE_KEY: testWallets.relayer.privateKey, TRANSFER_POLL_INTERVAL_MS: '200' },
      },
    });
    Object.assign(
      upstreams,
      Object.fromEntries(Object.entries(all.services).map(([name, s]) => [name, s.url])),
    );
    upstream = http.createServer((req, res) => {
      let body = '';
      req.on('data', (chunk) => {
        body += chunk;
      });
      req.on('end', () => {
        if (req.url === '/hooks') {
          hooks.push(JSON.parse(body));
          res.writeHead(200).end();
          return;
        }
        if (req.method !== 'HEAD') upstreamCalls.push(`${req.method} ${req.url}`);
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ quote: 'Served.' }));
      });
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    const upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
    const seller = await signUpSeller(baseUrl, Wallet.createRandom());
    const account = await fetch(`${baseUrl}/api/v1/account`, {
      method: 'PATCH',
      headers: { authorization: `Bearer ${seller.sessionToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ webhookUrl: `${upstreamUrl}/hooks` }),
    });
    expect(account.status).toBe(200);
    await createActiveSkill(baseUrl, seller.apiKey, {
      name: skill,
      type: 'API',
      apiBaseUrl: upstreamUrl,
      holdPeriodHours: 24,
      endpoints: [{ path: '/quote', method: 'GET', priceUsdc: '0.05', description: 'A quote' }],
    });
    await waitFor(async () => (await fetch(urlOf())).headers.get('payment-required') !== null, {
      timeoutMs: 20_000,
      message: 'the gateway never offered x402 for the skill',
    });
  }, 180_000);

  afterAll(async () => {
    await new Promise((r) => edge?.close(r));
    await new Promise((r) => upstream?.close(r));
    await all?.stop();
  });

  const urlOf = () => `${baseUrl}/api/v1/skills/${skill}/quote`;
  const balanceOf = (address: string) =>
    all.anvil.provider
      .call({
        to: all.usdcAddress,
        data: `0x70a08231000000000000000000000000${address.slice(2).toLowerCase()}`,
      })
      .then(BigInt);

  async function lookup(txHash: string): Promise<Lookup | undefined> {
    const r = await fetch(`${baseUrl}/api/v1/transactions/lookup?txHash=${txHash}`);
    if (r.status === 404) return undefined;
    expect(r.status).toBe(200);
    return (await r.json()) as Lookup;
  }

  async function gatewayRows(nonce: string) {
    const gateway = openSchema(all.env.schemaFor('gateway-proxy'));
    try {
      const found = await sql<{ auth_state: string; tx_hash: string | null; claim_state: string | null }>`
          select a.state as auth_state, a.tx_hash, c.state as claim_state from x402_authorizations a
            left join payment_claims c on c.id = a.claim_id
          where a.auth_nonce = ${nonce}`.execute(gateway);
      return found.rows[0];
    } finally {
      await gateway.destroy();
    }
  }

  it('202 settlement_pending, settled by the recovery pass, no retry: refunded on chain after the window, with the webhook', async () => {
    const signed = await signTransferAuthorization(testSigner('buyer', all.anvil.provider), {
      chainId: 31337,
      usdcAddress: all.usdcAddress,
      to: testWallets.escrow.address,
      valueMicro: 50_000n,
    });
    const header = encodeX402Header({
      x402Version: 2,
      accepted: {
        scheme: 'exact',
        network: NETWORK,
        amount: '50000',
        asset: all.usdcAddress,
        payTo: testWallets.escrow.address,
        maxTimeoutSeconds: 60,
        extra: { name: 'USD Coin', version: '2' },
      },
      payload: signed,
    });
    const nonce = signed.authorization.nonce.toLowerCase();
    const before = await balanceOf(testWallets.buyer.address);

    // Blocks held back: the transfer is sent but not included while the gateway waits.
    await setAutomine(all.anvil.provider, false);
    let pending: Response;
    try {
      pending = await fetch(urlOf(), { headers: { 'PAYMENT-SIGNATURE': header } });
      await mine(all.anvil.provider, 1);
    } finally {
      await setAutomine(all.anvil.provider, true);
    }
    expect(pending.status).toBe(202);
    expect(((await pending.json()) as { error: { code: string } }).error.code).toBe('settlement_pending');
    const started = Date.now();

    const settled = await waitFor(
      async () => {
        const row = await gatewayRows(nonce);
        return row?.auth_state === 'settled' && row.claim_state !== null ? row : undefined;
      },
      { timeoutMs: 20_000, message: 'the recovery pass never settled the payment' },
    );
    const txHash = settled.tx_hash!.toLowerCase();
    expect(settled.claim_state).toBe('retryable');
    expect(await balanceOf(testWallets.buyer.address)).toBe(before - 50_000n);

    const refunded = await waitFor(
      async () => {
        const found = await lookup(txHash);
        return found?.outcome === 'refunded' && found.refundTxHash ? found : undefined;
      },
      {
        timeoutMs: 60_000,
        intervalMs: 250,
        message: async () =>
          `the payment settled late was never refunded: gateway ${JSON.stringify(await gatewayRows(nonce))}, lookup ${JSON.stringify(await lookup(txHash))}`,
      },
    );
    console.log(
      `x402 payment settled after its caller gave up, never presented again: refunded on chain ${Date.now() - started} ms after the 202 (window ${RETRY_WINDOW_SECONDS} s, close margin 5 s)`,
    );
    expect(refunded).toMatchObject({ outcome: 'refunded', refundReason: 'unserved: timeout' });
    expect((await gatewayRows(nonce))?.claim_state).toBe('unserved');
    await waitFor(async () => (await balanceOf(testWallets.buyer.address)) === before, {
      timeoutMs: 20_000,
      message: 'the refund never reached the buyer on chain',
    });
    expect(upstreamCalls).toEqual([]);

    await expectRefundedOnce({
      all,
      baseUrl,
      operatorToken: OPERATOR_TOKEN,
      hooks,
      txHash,
      transactionId: refunded.transactionId,
    });
    expect(await balanceOf(testWallets.buyer.address)).toBe(before);

    // Presented again after the refund: refused, never served for free.
    const again = await fetch(urlOf(), { headers: { 'PAYMENT-SIGNATURE': header } });
    expect(again.status).toBe(402);
    expect(upstreamCalls).toEqual([]);
  });
});
