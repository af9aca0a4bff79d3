/**
 * Charged means served, or refunded, also when the gateway replica serving the call dies mid-call: a paid call is
 * forwarded by one replica (a process of its own) to a seller that never answers, and that replica is killed
 * (SIGKILL) before the seller's timeout, so nothing books the attempt's outcome and its claim stays in flight. The
 * surviving replica closes the claim once the call's window (RETRY_WINDOW_SECONDS from the claim) and the longest
 * an attempt can last have passed, and the ledger refunds the payer once: the USDC is back on chain, the seller
 * hears of it by webhook, the agent's lookup says refunded, reconciliation stays at 0. All services on real
 * Postgres, NATS and anvil.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { createAgent, type PaymentRequirements } from '@paygate/agent-client';
import {
  createActiveSkill,
  findFreePort,
  openSchema,
  signUpSeller,
  testWallets,
  waitFor,
} from '@paygate/testing';
import { Wallet } from 'ethers';
import { sql } from 'kysely';
import { startEdge } from '../dev/edge';
import { type AllServices, startAllServices } from './all-services';
import { expectRefundedOnce } from './fixtures/refunded-once';

jest.setTimeout(240_000);

const OPERATOR_TOKEN = 'unserved-in-flight-operator-token';
const RETRY_WINDOW_SECONDS = 4;
/** Both replicas' bound on the seller (the attempt of a replica that died is known dead 2 × this + 5 s on). */
const UPSTREAM_TIMEOUT_MS = 3000;
const ROOT = path.resolve(__dirname, '../..');

interface Lookup {
  transactionId: string;
  outcome: string;
  refundTxHash: string | null;
  refundReason: string | null;
}

describe('a paid call whose gateway replica died mid-call is refunded once', () => {
  let all: AllServices;
  let edge: http.Server;
  let upstream: http.Server;
  let baseUrl: string;
  let apiKey: string;
  let replica: ChildProcess | undefined;
  let replicaLog = '';
  const skill = `dies-${Date.now().toString(36)}`;
  const hooks: Array<Record<string, unknown>> = [];
  const hanging: http.ServerResponse[] = [];
  const gatewayEnv = {
    RATE_LIMIT_PER_MINUTE: '100000',
    RETRY_WINDOW_SECONDS: String(RETRY_WINDOW_SECONDS),
    UPSTREAM_TIMEOUT_MS: String(UPSTREAM_TIMEOUT_MS),
  };

  beforeAll(async () => {
    const upstreams: Record<string, string> = {};
    edge = await startEdge({ port: 0, upstreams });
    baseUrl = `http://127.0.0.1:${(edge.address() as AddressInfo).port}`;
    all = await startAllServices({
      label: 'inflight',
      operatorToken: OPERATOR_TOKEN,
      publicBaseUrl: baseUrl,
      extra: {
        'gateway-proxy': gatewayEnv,
        'escrow-ledger': { UNSERVED_SWEEP_INTERVAL_MS: '500' },
        settlement: { TRANSFER_POLL_INTERVAL_MS: '200' },
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
        if (req.method === 'HEAD') {
          res.writeHead(200).end();
          return;
        }
        // A paid call: never answered (the replica forwarding it dies first).
        hanging.push(res);
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
      endpoints: [{ path: '/hang', method: 'GET', priceUsdc: '0.05', description: 'Never answers' }],
    });
  }, 240_000);

  afterAll(async () => {
    if (replica && replica.exitCode === null && replica.signalCode === null) replica.kill('SIGKILL');
    for (const res of hanging) res.destroy();
    await new Promise((r) => edge?.close(r));
    upstream?.closeAllConnections();
    await new Promise((r) => upstream?.close(r));
    await all?.stop();
  });

  /** A second gateway replica, a process of its own on the same schema, bus and chain. */
  async function startReplica(): Promise<string> {
    const port = await findFreePort();
    const env = all.env.envFor('gateway-proxy', {
      CHAIN_RPC_URL: all.anvil.rpcUrl,
      CHAIN_NETWORK: 'local',
      USDC_ADDRESS: all.usdcAddress,
      ESCROW_ADDRESS: testWallets.escrow.address,
      CONFIRMATIONS: '1',
      PUBLIC_BASE_URL: baseUrl,
      OPERATOR_TOKEN,
      ...gatewayEnv,
      PORT: String(port),
    });
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', path.join(ROOT, 'services/gateway-proxy/src/main.ts')],
      { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    replica = child;
    child.stdout?.on('data', (chunk) => {
      replicaLog = (replicaLog + chunk).slice(-20_000);
    });
    child.stderr?.on('data', (chunk) => {
      replicaLog = (replicaLog + chunk).slice(-20_000);
    });
    const url = `http://127.0.0.1:${port}`;
    await waitFor(
      async () =>
        (await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(2000) }).catch(() => undefined))?.ok,
      {
        timeoutMs: 90_000,
        intervalMs: 250,
        message: async () => `the second replica never got ready: ${replicaLog}`,
      },
    );
    return url;
  }

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

  async function claimOf(txHash: string) {
    const gateway = openSchema(all.env.schemaFor('gateway-proxy'));
    try {
      const found = await sql<{ state: string; attempts: number; retry_until: Date | null }>`
          select state, attempts, retry_until from payment_claims where tx_hash = ${txHash}`.execute(gateway);
      return found.rows[0];
    } finally {
      await gateway.destroy();
    }
  }

  it('the surviving replica closes the dead one’s in-flight claim after the window; the ledger refunds it once, on chain, with the webhook', async () => {
    const replicaUrl = await startReplica();
    const paidUrl = `${replicaUrl}/api/v1/skills/${skill}/hang`;
    await waitFor(async () => (await fetch(paidUrl)).status === 402, {
      timeoutMs: 30_000,
      message: 'the second replica never offered the skill',
    });
    const challenge = await fetch(paidUrl);
    const requirements = (await challenge.json()) as PaymentRequirements;
    const agent = createAgent({
      wallet: new Wallet(testWallets.buyer.privateKey, all.anvil.provider),
      maxPricePerCall: '0.10',
    });
    const before = await balanceOf(testWallets.buyer.address);
    const paid = await agent.pay(paidUrl, requirements);
    const txHash = paid.txHash.toLowerCase();
    expect(await balanceOf(testWallets.buyer.address)).toBe(before - 50_000n);

    // The call reaches the seller through the second replica, which is killed before the seller's timeout.
    const hangingBefore = hanging.length;
    const answer = fetch(paidUrl, { headers: { 'x-402-payment': paid.header } }).then(
      (r) => ({ status: r.status, receipt: r.headers.get('x-402-receipt') }),
      (error: Error) => ({ status: 0, receipt: null, error: error.message }),
    );
    await waitFor(() => hanging.length > hangingBefore, {
      timeoutMs: 20_000,
      message: async () => `the paid call never reached the seller: ${replicaLog}`,
    });
    const killedAt = Date.now();
    replica!.kill('SIGKILL');
    expect(await answer).toMatchObject({ status: 0 });
    expect(await claimOf(txHash)).toMatchObject({ state: 'in_flight', retry_until: null });

    const refunded = await waitFor(
      async () => {
        const found = await lookup(txHash);
        return found?.outcome === 'refunded' ? found : undefined;
      },
      {
        timeoutMs: 60_000,
        intervalMs: 250,
        message: async () =>
          `the call left in flight was never refunded: claim ${JSON.stringify(await claimOf(txHash))}, lookup ${JSON.stringify(await lookup(txHash))}`,
      },
    );
    const ms = Date.now() - killedAt;
    console.log(
      `paid call left in flight by a killed replica: refunded on chain ${ms} ms after the kill (window ${RETRY_WINDOW_SECONDS} s from the claim, attempts known dead after ${2 * UPSTREAM_TIMEOUT_MS + 5000} ms, close margin 5 s)`,
    );
    expect(refunded).toMatchObject({ outcome: 'refunded', refundReason: 'unserved: timeout' });
    expect(await claimOf(txHash)).toMatchObject({ state: 'unserved' });
    expect(await balanceOf(testWallets.buyer.address)).toBe(before);

    await expectRefundedOnce({
      all,
      baseUrl,
      operatorToken: OPERATOR_TOKEN,
      hooks,
      txHash,
      transactionId: refunded.transactionId,
    });
    expect(await balanceOf(testWallets.buyer.address)).toBe(before);
    const again = await fetch(`${baseUrl}/api/v1/skills/${skill}/hang`, {
      headers: { 'x-402-payment': paid.header },
    });
    expect(again.status).toBe(402);
    expect(((await again.json()) as { reason: string }).reason).toBe('payment_already_used');
  });
});
