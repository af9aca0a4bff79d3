/**
 * Charged means served, or refunded: a seller API that answers 500 to paid calls, paid by the unmodified
 * @x402/fetch (with x402's payment-identifier, the same purchase presented again) and by an agent through the
 * gateway's MCP endpoint. When the retry window closes with no attempt served, the ledger refunds the payer from
 * escrow without the seller's approval: the buyer's USDC is back on chain, the seller hears of it by webhook, the
 * agent polls the outcome by its transaction, reconciliation stays at 0. A call served on a retry within its window
 * is never refunded. All services on real Postgres, NATS and anvil.
 */
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { createAgent } from '@paygate/agent-client';
import { usdcAbi } from '@paygate/chain';
import {
  createActiveSkill,
  minedReceipt,
  openSchema,
  signUpSeller,
  testSigner,
  testWallets,
  waitFor,
} from '@paygate/testing';
import { ExactEvmScheme } from '@x402/evm';
import { wrapFetchWithPayment, x402Client } from '@x402/fetch';
import { Contract, Wallet } from 'ethers';
import { sql } from 'kysely';
import { privateKeyToAccount } from 'viem/accounts';
import { startEdge } from '../dev/edge';
import { type AllServices, startAllServices } from './all-services';

jest.setTimeout(180_000);

const OPERATOR_TOKEN = 'unserved-refund-operator-token-00';
const NETWORK = 'eip155:31337';
/**
 * The buyer's retry window: short, so a refund comes within the test (production: 600 s), and long enough for
 * @x402/fetch's retry (a 402, then the paid request) to reach the gateway within it on a loaded host: at load 30 a
 * 4 s window closed before the retry did.
 */
const RETRY_WINDOW_SECONDS = 15;

interface Lookup {
  transactionId: string;
  outcome: string;
  refundTxHash: string | null;
  refundReason: string | null;
  refundableAmount: string;
}

describe('unserved paid calls are refunded by the ledger, on chain, without the seller', () => {
  let all: AllServices;
  let edge: http.Server;
  let upstream: http.Server;
  let baseUrl: string;
  let apiKey: string;
  let usdcAddress: string;
  const skill = `unserved-${Date.now().toString(36)}`;
  const hooks: Array<Record<string, unknown>> = [];
  const upstreamCalls: string[] = [];
  let flakyFailed = false;

  beforeAll(async () => {
    const upstreams: Record<string, string> = {};
    edge = await startEdge({ port: 0, upstreams });
    baseUrl = `http://127.0.0.1:${(edge.address() as AddressInfo).port}`;
    all = await startAllServices({
      label: 'unserved',
      operatorToken: OPERATOR_TOKEN,
      publicBaseUrl: baseUrl,
      extra: {
        'gateway-proxy': {
          RATE_LIMIT_PER_MINUTE: '100000',
          RETRY_WINDOW_SECONDS: String(RETRY_WINDOW_SECONDS),
        },
        'escrow-ledger': { UNSERVED_SWEEP_INTERVAL_MS: '500' },
        settlement: { RELAYER_PRIVATE_KEY: testWallets.relayer.privateKey, TRANSFER_POLL_INTERVAL_MS: '200' },
      },
    });
    usdcAddress = all.usdcAddress;
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
        // The registry's validation pings (HEAD) are not paid calls.
        if (req.method !== 'HEAD') upstreamCalls.push(`${req.method} ${req.url}`);
        const fail = req.method !== 'HEAD' && (req.url === '/fail' || (req.url === '/flaky' && !flakyFailed));
        if (req.url === '/flaky' && req.method !== 'HEAD') flakyFailed = true;
        res.writeHead(fail ? 500 : 200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(fail ? { error: 'the seller broke' } : { quote: 'Served.' }));
      });
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    const upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
    const seller = await signUpSeller(baseUrl, Wallet.createRandom());
    apiKey = seller.apiKey;
    const account = await fetch(`${baseUrl}/api/v1/account`, {
      method: 'PATCH',
      headers: { authorization: `Bearer ${seller.sessionToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ webhookUrl: `${upstreamUrl}/hooks` }),
    });
    expect(account.status).toBe(200);
    await createActiveSkill(baseUrl, apiKey, {
      name: skill,
      type: 'API',
      apiBaseUrl: upstreamUrl,
      holdPeriodHours: 24,
      endpoints: [
        { path: '/fail', method: 'GET', priceUsdc: '0.05', description: 'Always fails' },
        { path: '/flaky', method: 'GET', priceUsdc: '0.05', description: 'Fails once' },
      ],
    });
    await waitFor(async () => (await fetch(paidUrl('/fail'))).headers.get('payment-required') !== null, {
      timeoutMs: 20_000,
      message: 'the gateway never offered x402 for the skill',
    });
  }, 180_000);

  afterAll(async () => {
    await new Promise((r) => edge?.close(r));
    await new Promise((r) => upstream?.close(r));
    await all?.stop();
  });

  const paidUrl = (path: string) => `${baseUrl}/api/v1/skills/${skill}${path}`;
  const balanceOf = (address: string) =>
    all.anvil.provider
      .call({ to: usdcAddress, data: `0x70a08231000000000000000000000000${address.slice(2).toLowerCase()}` })
      .then(BigInt);

  /**
   * A buyer of its own for each case, with 1 USDC (x402 needs no gas of the buyer): a refund landing late in one case
   * cannot move another case's balance.
   */
  async function newPayer(): Promise<Wallet> {
    const payer = Wallet.createRandom();
    const usdc = new Contract(usdcAddress, usdcAbi, testSigner('deployer', all.anvil.provider));
    await minedReceipt(await usdc.getFunction('mint')(payer.address, 1_000_000n));
    return new Wallet(payer.privateKey, all.anvil.provider);
  }

  /** The unmodified @x402/fetch, every payment it makes under one payment identifier (x402's documented hook). */
  function payingWithId(payer: Wallet, paymentId: string) {
    const account = privateKeyToAccount(payer.privateKey as `0x${string}`);
    const client = x402Client.fromConfig({
      schemes: [{ network: NETWORK, client: new ExactEvmScheme(account) }],
      spendControls: {
        allowedAssets: [{ network: NETWORK, asset: usdcAddress, maxAmountPerPayment: '1000000' }],
      },
    });
    // What @x402/extensions' appendPaymentIdentifierToExtensions does: the id into the extension the 402 declared.
    client.onBeforePaymentCreation(async ({ paymentRequired }) => {
      const declared = paymentRequired.extensions?.['payment-identifier'] as
        | { info: { id?: string } }
        | undefined;
      if (declared) declared.info.id = paymentId;
    });
    return wrapFetchWithPayment(fetch, client);
  }

  const newPaymentId = () => `pay_${randomUUID().replace(/-/g, '')}`;

  /** What the agent polls: the public lookup by its payment's transaction. */
  async function lookup(txHash: string): Promise<Lookup | undefined> {
    const r = await fetch(`${baseUrl}/api/v1/transactions/lookup?txHash=${txHash}`);
    if (r.status === 404) return undefined;
    expect(r.status).toBe(200);
    return (await r.json()) as Lookup;
  }

  async function refundedOnChain(txHash: string, since: number): Promise<{ lookup: Lookup; ms: number }> {
    const done = await waitFor(
      async () => {
        const found = await lookup(txHash);
        return found?.outcome === 'refunded' ? found : undefined;
      },
      {
        timeoutMs: 60_000,
        intervalMs: 200,
        message: async () =>
          `the unserved call paid by ${txHash} was never refunded: ${await diagnose(txHash)}`,
      },
    );
    return { lookup: done, ms: Date.now() - since };
  }

  /** Where a refund stopped: the gateway's claim, the ledger's call attempts, decision and refunds. */
  async function diagnose(txHash: string): Promise<string> {
    const gateway = openSchema(all.env.schemaFor('gateway-proxy'));
    const ledger = openSchema(all.env.schemaFor('escrow-ledger'));
    try {
      const claims = await sql`select id, state, attempts, retry_until from payment_claims
          where tx_hash = ${txHash}`.execute(gateway);
      const ids = claims.rows.map((c: any) => c.id as string);
      const attempts = ids.length
        ? await sql`select * from payment_call_attempts where payment_id in (${sql.join(ids)})`.execute(
            ledger,
          )
        : { rows: [] };
      const unserved = ids.length
        ? await sql`select * from unserved_calls where payment_id in (${sql.join(ids)})`.execute(ledger)
        : { rows: [] };
      const refunds = await sql`select id, kind, status, amount_micro, payer from refunds`.execute(ledger);
      return JSON.stringify(
        { claims: claims.rows, attempts: attempts.rows, unserved: unserved.rows, refunds: refunds.rows },
        (_k, v) => (typeof v === 'bigint' ? v.toString() : v),
      );
    } finally {
      await Promise.all([gateway.destroy(), ledger.destroy()]);
    }
  }

  async function reconciliation() {
    const r = await fetch(`${baseUrl}/api/v1/reconciliation`, {
      headers: { authorization: `Bearer ${OPERATOR_TOKEN}` },
    });
    expect(r.status).toBe(200);
    return (await r.json()) as { balanced: boolean; difference: string };
  }

  async function sellerTransaction(transactionId: string) {
    const r = await fetch(`${baseUrl}/api/v1/transactions/${transactionId}`, {
      headers: { authorization: `Bearer ${apiKey}` },
    });
    expect(r.status).toBe(200);
    return (await r.json()) as Record<string, unknown> & { refunds: Array<Record<string, unknown>> };
  }

  async function gasCostOf(txHash: string) {
    const receipt = (await all.anvil.provider.getTransactionReceipt(txHash))!;
    return { gasUsed: receipt.gasUsed, weiPaid: receipt.gasUsed * receipt.gasPrice };
  }

  let flakyTxHash: string;

  it('a call that fails once and is served on its retry (same payment identifier) within the window is charged once', async () => {
    const pay = payingWithId(await newPayer(), newPaymentId());
    const first = await pay(paidUrl('/flaky'));
    expect(first.status).toBe(500);
    expect(first.headers.get('x-402-retry-until')).not.toBeNull();
    flakyTxHash = first.headers.get('x-402-receipt')!.toLowerCase();
    const again = await pay(paidUrl('/flaky'));
    expect(again.status).toBe(200);
    expect(again.headers.get('x-402-receipt')!.toLowerCase()).toBe(flakyTxHash);
    await waitFor(async () => (await lookup(flakyTxHash))?.outcome === 'served', {
      timeoutMs: 20_000,
      message: 'the served retry never reached the ledger',
    });
  });

  /**
   * The two unserved cases each wait out a retry window: both start with the first of their tests, so the windows
   * run at once, and each test awaits its own. Payers are minted one after the other (one deployer nonce).
   */
  let unserved: { x402: Promise<void>; mcp: Promise<void> } | undefined;
  const unservedCases = async () => {
    if (!unserved) {
      const [x402Payer, mcpPayer] = [await newPayer(), await newPayer()];
      const mcp = mcpCase(mcpPayer);
      unserved = { x402: x402Case(x402Payer, mcp), mcp };
      // Either may fail before its test awaits it.
      unserved.x402.catch(() => undefined);
      unserved.mcp.catch(() => undefined);
    }
    return unserved;
  };

  it('@x402/fetch: a call its seller answers 500, presented again under its payment identifier, is charged once and its USDC is back on chain after the window', async () => {
    await (await unservedCases()).x402;
  });

  async function x402Case(payer: Wallet, sibling: Promise<void>) {
    const before = await balanceOf(payer.address);
    const pay = payingWithId(payer, newPaymentId());
    const started = Date.now();
    const first = await pay(paidUrl('/fail'));
    expect(first.status).toBe(500);
    const txHash = first.headers.get('x-402-receipt')!.toLowerCase();
    expect(await balanceOf(payer.address)).toBe(before - 50_000n);
    // The same purchase again (x402's payment-identifier): the same transaction, nothing more charged.
    const again = await pay(paidUrl('/fail'));
    expect(again.status).toBe(500);
    expect(again.headers.get('x-402-receipt')!.toLowerCase()).toBe(txHash);
    expect(await balanceOf(payer.address)).toBe(before - 50_000n);
    expect(await lookup(txHash)).toMatchObject({ outcome: 'retryable' });

    const { lookup: refunded, ms } = await refundedOnChain(txHash, started);
    expect(refunded).toMatchObject({
      outcome: 'refunded',
      refundReason: 'unserved: error_status 500',
      refundableAmount: '0',
    });
    expect(await balanceOf(payer.address)).toBe(before);
    const gas = await gasCostOf(refunded.refundTxHash!);
    console.log(
      `unserved call refunded on chain ${ms} ms after the first answer (retry window ${RETRY_WINDOW_SECONDS} s); refund transfer gas ${gas.gasUsed} (${gas.weiPaid} wei)`,
    );

    const txn = await sellerTransaction(refunded.transactionId);
    expect(txn).toMatchObject({ status: 'refunded', refundedAmount: '0.05' });
    expect(txn.refunds).toMatchObject([
      { amount: '0.05', phase: 'in_escrow', status: 'completed', refundTxHash: refunded.refundTxHash },
    ]);
    const hook = await waitFor(
      async () =>
        hooks.find((h) => h.event === 'payment.refunded' && h.transactionId === refunded.transactionId),
      { timeoutMs: 20_000, message: 'the seller never heard of the refund' },
    );
    expect(hook).toMatchObject({ reason: 'unserved', amount: '0.05', upstreamStatus: 500, txHash });
    // The sibling case's refund on chain too: no refund of the window in flight when the books are compared.
    await sibling.catch(() => undefined);
    expect(await reconciliation()).toMatchObject({ balanced: true, difference: '0' });
  }

  it("an agent through the gateway's MCP endpoint: the failed tool call's USDC comes back on chain", async () => {
    await (await unservedCases()).mcp;
  });

  async function mcpCase(payer: Wallet) {
    const client = new Client({ name: 'agent', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${baseUrl}/api/v1/mcp`)));
    try {
      const tool = `${skill}__get_fail`;
      await waitFor(async () => (await client.listTools()).tools.some((t) => t.name === tool), {
        timeoutMs: 30_000,
        message: `the gateway never listed ${tool}`,
      });
      const before = await balanceOf(payer.address);
      const agent = createAgent({
        wallet: payer,
        maxPricePerCall: '0.10',
      });
      const started = Date.now();
      const result = await agent.callTool(client, { name: tool });
      expect(result.isError).toBe(true);
      const settlement = (result._meta as Record<string, { success: boolean; transaction: string }>)[
        'x402/payment-response'
      ]!;
      const txHash = settlement.transaction.toLowerCase();
      expect(await balanceOf(payer.address)).toBe(before - 50_000n);
      const { lookup: refunded, ms } = await refundedOnChain(txHash, started);
      expect(await balanceOf(payer.address)).toBe(before);
      console.log(`unserved MCP tool call refunded on chain ${ms} ms after its answer`);
      expect(refunded.refundReason).toBe('unserved: error_status 500');
    } finally {
      await client.close();
    }
  }

  it('the call served on its retry was never refunded, though windows closed and refunds went out after it', async () => {
    expect(await lookup(flakyTxHash)).toMatchObject({
      outcome: 'served',
      refundTxHash: null,
      refundableAmount: '0.05',
    });
    expect(hooks.filter((h) => h.event === 'payment.refunded' && h.txHash === flakyTxHash)).toEqual([]);
    expect(await reconciliation()).toMatchObject({ balanced: true, difference: '0' });
  });
  it('a seller blocks a payer: its paid calls are refused before anything is charged, until unblocked', async () => {
    const payer = await newPayer();
    const buyer = payer.address;
    const asSeller = (method: string, path: string, body?: unknown) =>
      fetch(`${baseUrl}/api/v1/blocked-payers${path}`, {
        method,
        headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    expect((await asSeller('PUT', '/not-an-address', {})).status).toBe(400);
    const blocked = await asSeller('PUT', `/${buyer}`, { reason: 'calls built to fail' });
    expect(blocked.status).toBe(200);
    expect(await blocked.json()).toMatchObject({ payer: buyer.toLowerCase(), reason: 'calls built to fail' });
    expect(await (await asSeller('GET', '')).json()).toMatchObject({
      data: [{ payer: buyer.toLowerCase() }],
    });
    const before = await balanceOf(buyer);
    const callsBefore = upstreamCalls.length;
    const refused = await payingWithId(payer, newPaymentId())(paidUrl('/fail'));
    expect(refused.status).toBe(403);
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('payer_blocked');
    expect(await balanceOf(buyer)).toBe(before);
    expect(upstreamCalls.length).toBe(callsBefore);
    expect((await asSeller('DELETE', `/${buyer}`)).status).toBe(204);
    expect((await asSeller('DELETE', `/${buyer}`)).status).toBe(404);
    expect((await payingWithId(payer, newPaymentId())(paidUrl('/flaky'))).status).toBe(200);
  });
});
