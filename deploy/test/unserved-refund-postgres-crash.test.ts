/**
 * An unserved paid call's refund survives a Postgres crash in the middle of it: every service on the suite's own
 * Postgres (fixtures/own-postgres.ts; the shared one is never touched), a seller answering 500, and Postgres
 * killed (kill -9, then crash recovery) while the buyer's retry window runs out and the gateway, the ledger and
 * settlement close, decide and send the refund. The buyer gets its USDC back exactly once, reconciliation 0.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { createAgent } from '@paygate/agent-client';
import {
  createActiveSkill,
  signUpSeller,
  TEMPLATE_DATABASE_ENV,
  testWallets,
  waitFor,
} from '@paygate/testing';
import { Wallet, zeroPadValue } from 'ethers';
import { sql } from 'kysely';
import { startEdge } from '../dev/edge';
import type * as AllServicesModule from './all-services';
import type { AllServices } from './all-services';

jest.setTimeout(240_000);

const OPERATOR_TOKEN = 'unserved-crash-operator-token-00';
const TRANSFER_TOPIC = '0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef';

/** The fixture's process: `READY <url>` once up, then `crash` on stdin answered `DONE crash`. */
function ownPostgres(dir: string) {
  const child: ChildProcess = spawn(
    process.execPath,
    ['--import', 'tsx', path.join(__dirname, 'fixtures/own-postgres.ts')],
    { env: { ...process.env, OWN_POSTGRES_DIR: dir }, stdio: ['pipe', 'pipe', 'inherit'] },
  );
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    output += chunk.toString();
  });
  const lineStarting = (prefix: string) =>
    waitFor(() => output.split('\n').find((l) => l.startsWith(prefix) || l.startsWith('FAILED')), {
      timeoutMs: 120_000,
      intervalMs: 100,
      message: `own Postgres never said ${prefix}: ${output}`,
    });
  return {
    async url() {
      const ready = await lineStarting('READY ');
      if (!ready.startsWith('READY ')) throw new Error(ready);
      return ready.slice('READY '.length);
    },
    async crash() {
      child.stdin!.write('crash\n');
      await lineStarting('DONE crash');
    },
    async stop() {
      if (child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.stdin!.end();
      const killer = setTimeout(() => child.kill('SIGKILL'), 30_000);
      await exited;
      clearTimeout(killer);
    },
  };
}

describe('an unserved call refunded across a Postgres crash', () => {
  let dir: string;
  let postgres: ReturnType<typeof ownPostgres>;
  let all: AllServices;
  let edge: http.Server;
  let upstream: http.Server;
  let baseUrl: string;
  const skill = `crash-${Date.now().toString(36)}`;

  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'paygate-unserved-pg-'));
    postgres = ownPostgres(dir);
    // The test environment reads DATABASE_URL when @paygate/testing loads: set it first, then load the harness.
    process.env.DATABASE_URL = `${await postgres.url()}`;
    // The shared server's migrated template is not on this one: each schema is migrated by its service.
    delete process.env[TEMPLATE_DATABASE_ENV];
    // Under jest the suite's database commits without waiting for the WAL (a test never crashes the shared server);
    // this one is crashed, so its commits are durable as in production: the test environment reads the worker id.
    const workerId = process.env.JEST_WORKER_ID;
    delete process.env.JEST_WORKER_ID;
    jest.resetModules();
    const { startAllServices } = require('./all-services') as typeof AllServicesModule;
    const upstreams: Record<string, string> = {};
    edge = await startEdge({ port: 0, upstreams });
    baseUrl = `http://127.0.0.1:${(edge.address() as AddressInfo).port}`;
    all = await startAllServices({
      label: 'unservedpg',
      operatorToken: OPERATOR_TOKEN,
      publicBaseUrl: baseUrl,
      extra: {
        'gateway-proxy': { RATE_LIMIT_PER_MINUTE: '100000', RETRY_WINDOW_SECONDS: '4' },
        'escrow-ledger': { UNSERVED_SWEEP_INTERVAL_MS: '500' },
        settlement: { RELAYER_PRIVATE_KEY: testWallets.relayer.privateKey, TRANSFER_POLL_INTERVAL_MS: '200' },
      },
    });
    process.env.JEST_WORKER_ID = workerId;
    Object.assign(
      upstreams,
      Object.fromEntries(Object.entries(all.services).map(([name, s]) => [name, s.url])),
    );
    upstream = http.createServer((req, res) => {
      res.writeHead(req.method === 'HEAD' ? 200 : 500, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: 'the seller broke' }));
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    const { apiKey } = await signUpSeller(baseUrl, Wallet.createRandom());
    await createActiveSkill(baseUrl, apiKey, {
      name: skill,
      type: 'API',
      apiBaseUrl: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`,
      holdPeriodHours: 24,
      endpoints: [{ path: '/fail', method: 'GET', priceUsdc: '0.05', description: 'Always fails' }],
    });
    await waitFor(async () => (await fetch(`${baseUrl}/api/v1/skills/${skill}/fail`)).status === 402, {
      timeoutMs: 30_000,
      message: 'the gateway never offered the skill',
    });
  }, 240_000);

  afterAll(async () => {
    await new Promise((r) => edge?.close(r));
    await new Promise((r) => upstream?.close(r));
    await all?.stop().catch(() => undefined);
    await postgres?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  /** The gateway's claims and the ledger's unserved calls and refunds, read on the suite's own Postgres. */
  async function diagnose(): Promise<string> {
    const { openSchema } = require('@paygate/testing') as typeof import('@paygate/testing');
    const gateway = openSchema(all.env.schemaFor('gateway-proxy'));
    const ledger = openSchema(all.env.schemaFor('escrow-ledger'));
    try {
      const read = async (db: typeof gateway, query: string) => (await sql.raw(query).execute(db)).rows;
      return JSON.stringify(
        {
          claims: await read(gateway, 'select id, state, attempts, retry_until from payment_claims'),
          attempts: await read(ledger, 'select payment_id, attempt, outcome from payment_call_attempts'),
          unserved: await read(ledger, 'select payment_id, status, decision from unserved_calls'),
          refunds: await read(ledger, 'select id, kind, status from refunds'),
        },
        (_k, v) => (typeof v === 'bigint' ? v.toString() : v),
      );
    } finally {
      await Promise.all([gateway.destroy(), ledger.destroy()]);
    }
  }

  const balanceOf = (address: string) =>
    all.anvil.provider
      .call({ to: all.usdcAddress, data: `0x70a08231${zeroPadValue(address, 32).slice(2)}` })
      .then(BigInt);

  it('the buyer gets its USDC back once, and reconciliation stays at 0', async () => {
    const buyer = testWallets.buyer.address;
    const before = await balanceOf(buyer);
    const agent = createAgent({
      wallet: new Wallet(testWallets.buyer.privateKey, all.anvil.provider),
      maxPricePerCall: '0.10',
    });
    const answer = await agent.fetch(`${baseUrl}/api/v1/skills/${skill}/fail`);
    expect(answer.status).toBe(500);
    const txHash = answer.headers.get('x-402-receipt')!.toLowerCase();
    expect(await balanceOf(buyer)).toBe(before - 50_000n);
    // Killed while the window runs out: the close, the decision and the transfer happen around the recovery.
    await postgres.crash();
    await waitFor(async () => (await balanceOf(buyer)) === before, {
      timeoutMs: 90_000,
      intervalMs: 250,
      message: async () => `the buyer never got its USDC back: ${await diagnose()}`,
    });
    const refundsToBuyer = await all.anvil.provider.getLogs({
      address: all.usdcAddress,
      fromBlock: 0,
      toBlock: 'latest',
      topics: [TRANSFER_TOPIC, zeroPadValue(testWallets.escrow.address, 32), zeroPadValue(buyer, 32)],
    });
    expect(refundsToBuyer).toHaveLength(1);
    // The ledger books the refund as sent once settlement's refund.completed reaches it, a moment after the block.
    await waitFor(
      async () => {
        const r = await fetch(`${baseUrl}/api/v1/transactions/lookup?txHash=${txHash}`);
        return r.status === 200 && ((await r.json()) as { outcome: string }).outcome === 'refunded';
      },
      {
        timeoutMs: 30_000,
        message: async () => `the ledger never booked the refund as sent: ${await diagnose()}`,
      },
    );
    const reconciliation = await waitFor(async () => {
      const r = await fetch(`${baseUrl}/api/v1/reconciliation`, {
        headers: { authorization: `Bearer ${OPERATOR_TOKEN}` },
      });
      return r.status === 200 ? ((await r.json()) as { balanced: boolean; difference: string }) : undefined;
    });
    expect(reconciliation).toMatchObject({ balanced: true, difference: '0' });
    // Nothing more goes out afterwards (a second refund would be a second transfer).
    expect(await balanceOf(buyer)).toBe(before);
  });
});
