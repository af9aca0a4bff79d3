/**
 * While Postgres or NATS is away, a write route (the ledger's refunds, refund approvals and operator writes,
 * settlement's settle-now) answers 2xx, 4xx or a clean 503 with Retry-After, never another 5xx, and a write retried under its Idempotency-Key is applied once (make chaos saw refund approvals and seller
 * refunds answer 500 under Postgres faults). The suite's own Postgres (a table locked past lock_timeout, crashed,
 * its backends terminated, stopped and started) and its own nats-server (killed and restarted on its port): never the shared ones.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { newRefundRequestSigning, signRefundRequest } from '@paygate/agent-client';
import {
  type AuthorizedNatsServer,
  type Bus,
  connectBus,
  encodeEnvelope,
  findNatsServerBinary,
  generateNatsPasswords,
  requestRpc,
  startAuthorizedNatsServer,
} from '@paygate/bus';
import { createEvent } from '@paygate/contracts';
import { loadConfig, type RunningEscrowLedger, startEscrowLedger } from '@paygate/escrow-ledger';
import type { StartedService } from '@paygate/runtime';
import { loadConfig as settlementConfig, startSettlement } from '@paygate/settlement';
import {
  type AnvilInstance,
  deployTestUsdc,
  findRestartablePort,
  randomSuffix,
  serveSellersForTests,
  startAnvil,
  testWallets,
  waitFor,
} from '@paygate/testing';
import { Wallet } from 'ethers';
import pg from 'pg';

const OPERATOR_TOKEN = 'outage-operator-token-0123456789';
const SELLER_KEY = 'sk_test_outage_seller_0123456789';
const PLACEHOLDER_USDC = '0x5FbDB2315678afecb367f032d93F642f64180aa3';
const BUYER = new Wallet(testWallets.buyer.privateKey);

/** The suite's own Postgres, in a process of its own (fixtures/own-postgres.ts), and the faults it runs. */
class OwnPostgres {
  private lines: string[] = [];
  private waiters: Array<() => void> = [];

  private constructor(private readonly child: ChildProcess) {
    let buffered = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      buffered += chunk.toString();
      const parts = buffered.split('\n');
      buffered = parts.pop()!;
      this.lines.push(...parts);
      for (const wake of this.waiters.splice(0)) wake();
    });
    child.once('exit', () => {
      for (const wake of this.waiters.splice(0)) wake();
    });
  }

  url = '';

  static async start(dir: string): Promise<OwnPostgres> {
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', path.join(__dirname, 'fixtures/own-postgres.ts')],
      { env: { ...process.env, OWN_POSTGRES_DIR: dir }, stdio: ['pipe', 'pipe', 'inherit'] },
    );
    const own = new OwnPostgres(child);
    const ready = await own.line((l) => l.startsWith('READY ') || l.startsWith('FAILED '), 120_000);
    if (!ready.startsWith('READY ')) throw new Error(`own Postgres did not start: ${ready}`);
    own.url = ready.slice('READY '.length);
    return own;
  }

  /** Runs a fault (crash, terminate, stop, start) and resolves once it is done. */
  async fault(name: 'crash' | 'terminate' | 'stop' | 'start'): Promise<void> {
    this.child.stdin!.write(`${name}\n`);
    await this.line((l) => l === `DONE ${name}`, 60_000);
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null) return;
    const exited = new Promise((resolve) => this.child.once('exit', resolve));
    this.child.stdin!.end();
    await exited;
  }

  private async line(matches: (line: string) => boolean, timeoutMs: number): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const index = this.lines.findIndex(matches);
      if (index >= 0) return this.lines.splice(0, index + 1).pop()!;
      if (this.child.exitCode !== null || Date.now() > deadline) {
        throw new Error(`own Postgres: no such line (${this.lines.join(' | ')})`);
      }
      await new Promise<void>((resolve) => {
        this.waiters.push(resolve);
        setTimeout(resolve, 500);
      });
    }
  }
}

interface Answer {
  route: string;
  status: number;
  retryAfter: string | null;
  code?: string;
}

describe('write routes while Postgres or NATS is away: 2xx, 4xx or 503 with Retry-After, each write once', () => {
  const namespace = `outage${randomSuffix()}`;
  const passwords = generateNatsPasswords();
  const sellerId = `sel_outage${randomSuffix()}`;
  let dir: string;
  let postgres: OwnPostgres;
  let natsPort: number;
  let nats: AuthorizedNatsServer;
  let registryBus: Bus;
  let gatewayBus: Bus;
  let ledger: RunningEscrowLedger;
  let anvil: AnvilInstance;
  let settlement: StartedService;
  const answers: Answer[] = [];

  const startNats = () =>
    startAuthorizedNatsServer({
      binary: findNatsServerBinary()!,
      dir: path.join(dir, 'nats'),
      namespace,
      passwords,
      port: natsPort,
      startTimeoutMs: 30_000,
    });

  beforeAll(async () => {
    if (!findNatsServerBinary())
      throw new Error('nats-server is not installed (apt-get install nats-server)');
    dir = mkdtempSync(path.join(os.tmpdir(), 'paygate-write-outage-'));
    mkdirSync(path.join(dir, 'nats'));
    postgres = await OwnPostgres.start(dir);
    natsPort = await findRestartablePort();
    nats = await startNats();
    const busAs = (user: 'registry' | 'gateway-proxy') =>
      connectBus({ url: nats.url, namespace, name: `outage-${user}`, user, password: passwords[user] });
    registryBus = await busAs('registry');
    await serveSellersForTests(registryBus, {
      [SELLER_KEY]: {
        sellerId,
        walletAddress: testWallets.seller.address,
        payoutAddress: testWallets.seller.address,
        publishableKey: `pk_test_${sellerId}_0123456789`,
        apiKeyVersion: 1,
      },
    });
    anvil = await startAnvil();
    const { address: usdcAddress } = await deployTestUsdc(anvil.rpcUrl);
    const own = (service: 'escrow-ledger' | 'settlement', schema: string) => ({
      ...process.env,
      DATABASE_URL: postgres.url,
      DB_SCHEMA: schema,
      NATS_URL: nats.url,
      NATS_USER: service,
      NATS_PASSWORD: passwords[service],
      EVENT_NAMESPACE: namespace,
      PORT: '0',
      LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
      OPERATOR_TOKEN,
      // Waits shorter than a request's patience, so an outage is answered, not waited out.
      DB_CONNECT_TIMEOUT_MS: '1000',
      DB_LOCK_TIMEOUT_MS: '500',
      DB_POOL_SIZE: '4',
      STARTUP_ATTEMPTS: '8',
    });
    settlement = await startSettlement(
      settlementConfig({
        ...own('settlement', 'settlement'),
        CHAIN_RPC_URL: anvil.rpcUrl,
        CHAIN_NETWORK: 'local',
        USDC_ADDRESS: usdcAddress,
        ESCROW_PRIVATE_KEY: testWallets.escrow.privateKey,
        CONFIRMATIONS: '1',
        SCHEDULER_INTERVAL_MS: '3600000',
        LEDGER_TIMEOUT_MS: '1000',
      }),
    );
    ledger = await startEscrowLedger(
      loadConfig({
        ...own('escrow-ledger', 'ledger'),
        CHAIN_RPC_URL: 'http://127.0.0.1:9',
        USDC_ADDRESS: PLACEHOLDER_USDC,
        ESCROW_ADDRESS: testWallets.escrow.address,
        CHAIN_CONFIRM_TIMEOUT_MS: '0',
        REFUNDS_PER_MINUTE: '100000',
        REFUND_REQUESTS_PER_MINUTE: '100000',
        REFUND_MAX_PARTIAL_PER_TRANSACTION: '1000',
      }),
    );
    gatewayBus = await busAs('gateway-proxy');
    // The seller as the registry publishes it: settlement settles the sellers it has heard of.
    const seller = createEvent('seller.updated', 'registry', {
      sellerId,
      revision: 1,
      walletAddress: testWallets.seller.address,
      payoutAddress: testWallets.seller.address,
      publishableKey: `pk_test_${sellerId}_0123456789`,
      apiKeyVersion: 1,
      webhookUrl: null,
      webhookSecretVersion: 0,
      settlementFrequency: 'DAILY',
      minimumSettlement: '1',
      updatedAt: new Date().toISOString(),
    });
    await registryBus.js.publish(registryBus.subjectFor('seller.updated'), encodeEnvelope(seller), {
      msgID: seller.id,
    });
    await waitFor(
      async () =>
        (
          await fetch(`${settlement.url}/api/v1/operator/settlements/run`, {
            method: 'POST',
            headers: { authorization: `Bearer ${OPERATOR_TOKEN}`, 'content-type': 'application/json' },
            body: JSON.stringify({ sellerId }),
          })
        ).status === 200,
      { message: 'settlement never heard of the seller', timeoutMs: 30_000 },
    );
  }, 180_000);

  afterAll(async () => {
    await ledger?.stop().catch(() => undefined);
    await settlement?.stop().catch(() => undefined);
    await anvil?.stop();
    await gatewayBus?.close().catch(() => undefined);
    await registryBus?.close().catch(() => undefined);
    await nats?.stop();
    await postgres?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  async function call(
    route: string,
    urlPath: string,
    init: {
      method?: string;
      body?: unknown;
      key?: string | null;
      idempotencyKey?: string;
      base?: string;
    } = {},
  ): Promise<{ status: number; body: any }> {
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    const key = init.key === undefined ? SELLER_KEY : init.key;
    if (key) headers.authorization = `Bearer ${key}`;
    if (init.idempotencyKey) headers['idempotency-key'] = init.idempotencyKey;
    let status = 0;
    let body: any = null;
    let retryAfter: string | null = null;
    try {
      const response = await fetch(`${init.base ?? ledger.url}${urlPath}`, {
        method: init.method ?? (init.body === undefined ? 'GET' : 'POST'),
        headers,
        body: init.body === undefined ? undefined : JSON.stringify(init.body),
        signal: AbortSignal.timeout(30_000),
      });
      status = response.status;
      retryAfter = response.headers.get('retry-after');
      const text = await response.text();
      body = text ? JSON.parse(text) : null;
    } catch (error) {
      throw new Error(`${route}: no answer (${(error as Error).message})`);
    }
    answers.push({ route, status, retryAfter, code: body?.error?.code });
    return { status, body };
  }

  /** Sends the write until it is answered with anything but 503 (same Idempotency-Key), at most for 90 s. */
  async function untilDecided(
    route: string,
    urlPath: string,
    init: { method?: string; body?: unknown; key?: string | null; idempotencyKey?: string },
  ): Promise<{ status: number; body: any }> {
    const deadline = Date.now() + 90_000;
    for (;;) {
      const answer = await call(route, urlPath, init);
      if (answer.status !== 503 || Date.now() > deadline) return answer;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }

  /** Books a payment by its claim (the one booking command), retried while the ledger cannot answer. */
  async function book(amount: string): Promise<string> {
    const txHash = `0x${randomBytes(32).toString('hex')}`;
    const paymentId = `pay_outage_${txHash.slice(2, 18)}`;
    const reply = await requestRpc(
      gatewayBus,
      'ledger.claim_transfer',
      {
        chainId: 31337,
        txHash,
        logIndex: 0,
        claimedVia: 'x402',
        reference: `local:${txHash}`,
        payer: BUYER.address,
        amount,
        payment: {
          paymentId,
          source: 'x402',
          sellerId,
          skillId: 'skl_outage',
          skillName: 'outage',
          endpointId: null,
          sessionId: null,
          network: 'local',
          token: PLACEHOLDER_USDC,
          holdPeriodHours: 24,
        },
      },
      { timeoutMs: 10_000 },
    );
    if (!reply.ok || !('transactionId' in reply) || !reply.transactionId) {
      throw new Error(`payment not booked: ${JSON.stringify(reply)}`);
    }
    return reply.transactionId;
  }

  async function fileRequest(transactionId: string): Promise<string> {
    const signing = newRefundRequestSigning(31337, new Date());
    const signature = await signRefundRequest(BUYER, { transactionId }, 'never arrived', signing);
    const filed = await untilDecided('file refund request', '/api/v1/refund-requests', {
      key: null,
      body: { transactionId, reason: 'never arrived', ...signing, signature },
    });
    if (filed.status !== 201 && filed.status !== 200) throw new Error(`request not filed: ${filed.status}`);
    return filed.body.refundRequestId as string;
  }

  const ownDb = () => new pg.Client({ connectionString: postgres.url, connectionTimeoutMillis: 5000 });
  async function query<T>(text: string, values: unknown[] = []): Promise<T[]> {
    const client = ownDb();
    await client.connect();
    try {
      return (await client.query(text, values)).rows as T[];
    } finally {
      await client.end();
    }
  }

  async function holdTableLock(table: string, ms: number): Promise<void> {
    const client = ownDb();
    client.on('error', () => undefined);
    await client.connect();
    try {
      await client.query('begin');
      await client.query(`lock table ${table} in access exclusive mode`);
      await new Promise((resolve) => setTimeout(resolve, ms));
      await client.query('commit');
    } finally {
      await client.end().catch(() => undefined);
    }
  }

  it('refunds, refund approvals, operator writes and settle-now through a table lock, Postgres crashes, restarts and a NATS restart', async () => {
    const transactions: string[] = [];
    for (let i = 0; i < 6; i++) transactions.push(await book('5'));
    const requests: string[] = [];
    for (let i = 0; i < 6; i++) requests.push(await fileRequest(await book('1')));

    let faultsDone = false;
    const faults = (async () => {
      const pause = () => new Promise((resolve) => setTimeout(resolve, 700));
      try {
        await pause();
        // A table locked past the ledger's lock_timeout (a migration, an operator's query): refunds wait, then fail.
        await holdTableLock('ledger.refunds', 2500);
        await pause();
        await postgres.fault('crash');
        await pause();
        await postgres.fault('terminate');
        await pause();
        await postgres.fault('stop');
        await new Promise((resolve) => setTimeout(resolve, 2000));
        await postgres.fault('start');
        await pause();
        nats.child.kill('SIGKILL');
        await nats.stop();
        await new Promise((resolve) => setTimeout(resolve, 2000));
        nats = await startNats();
        await pause();
        await postgres.fault('crash');
      } finally {
        faultsDone = true;
      }
    })();

    // Writes go on, each under its own Idempotency-Key, until the faults are over.
    const refundKeys: string[] = [];
    const refundsAnswered = new Map<string, string>();
    const writer = async (worker: number) => {
      let n = 0;
      while (!faultsDone) {
        const txn = transactions[(worker + n) % transactions.length]!;
        const key = `outage-refund-${worker}-${n++}`;
        refundKeys.push(key);
        const answer = await untilDecided('seller refund', '/api/v1/refunds', {
          idempotencyKey: key,
          body: { transactionId: txn, amount: '0.01', reason: 'outage' },
        });
        if (answer.status === 201) refundsAnswered.set(key, answer.body.refundId);
        await call('operator credit limit', `/api/v1/operator/ledger/sellers/${sellerId}/credit-limit`, {
          method: 'PUT',
          key: OPERATOR_TOKEN,
          body: { creditLimit: String(n % 3) },
        });
        await call('transactions list', '/api/v1/transactions');
        await call('settle-now', '/api/v1/operator/settlements/run', {
          base: settlement.url,
          key: OPERATOR_TOKEN,
          body: { sellerId },
        });
      }
    };
    const approver = async () => {
      // Spread over the faults: one approval every 800 ms.
      for (const id of requests) {
        await new Promise((resolve) => setTimeout(resolve, 800));
        const approved = await untilDecided(
          'approve refund request',
          `/api/v1/refund-requests/${id}/approve`,
          {
            idempotencyKey: `outage-approve-${id}`,
            body: {},
          },
        );
        expect(approved.status).toBe(200);
      }
    };
    await Promise.all([faults, writer(0), writer(1), approver()]);

    // Only 2xx, 4xx or 503 with Retry-After, through every fault.
    const unclean = answers.filter(
      (a) => a.status >= 500 && !(a.status === 503 && a.retryAfter !== null && Number(a.retryAfter) > 0),
    );
    expect(unclean).toEqual([]);
    expect(answers.some((a) => a.status === 503)).toBe(true); // the faults were met
    // Each refund answered 201 was booked once, under its key; none other was booked.
    await waitFor(() => query('select 1').then((rows) => rows.length === 1), { timeoutMs: 30_000 });
    const booked = await query<{ key: string; n: number }>(
      `select key, count(*)::int as n from ledger.idempotency_keys
        where seller_id = $1 and key like 'outage-refund-%' group by key`,
      [sellerId],
    );
    const refundRows = await query<{ n: number }>(
      `select count(*)::int as n from ledger.refunds r join ledger.transactions t on t.id = r.transaction_id
        where t.id = any($1) and r.reason = 'outage'`,
      [transactions],
    );
    expect(booked.every((row) => row.n === 1)).toBe(true);
    expect(refundRows[0]!.n).toBe(refundsAnswered.size);
    const approvedRequests = await query<{ n: number }>(
      `select count(*)::int as n from ledger.refund_requests where id = any($1) and status <> 'pending'`,
      [requests],
    );
    expect(approvedRequests[0]!.n).toBe(requests.length);
  }, 300_000);
});
