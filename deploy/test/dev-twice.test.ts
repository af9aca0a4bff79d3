/**
 * `make dev` twice in a row: the real dev runner (deploy/dev/main.ts) starts a new chain each time, so each run
 * must start from state that matches it. Each run pays the demo skill through the edge as an agent and gets 200;
 * the second run repeats the first one's payments from the same deterministic keys on a new chain (often the
 * very same tx hash), which only works on fresh schemas and streams. On each run the public catalog lists exactly
 * the demo skills (a skill added in run 1 is gone in run 2), the demo API's answer names the tx hash it was paid
 * with, an operator settle-now (with the token the runner prints) pays the seller on the new chain (run 2 signs
 * with the new chain's nonces), and reconciliation of ledger and chain shows difference 0. Both runs stop cleanly
 * within seconds of a signal (SIGTERM after run 1, SIGINT, Ctrl-C, after run 2), even with the connections an hour in
 * a browser leaves open (a widget's WebSocket through the edge, keep-alive connections): exit code 0 and every port
 * free again. Before, the runner waited for the edge to close, which never happened while a browser held a socket.
 *
 *   npx jest deploy/test/dev-twice
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { createAgent } from '@paygate/agent-client';
import { usdcAbi } from '@paygate/chain';
import {
  createActiveSkill,
  ephemeralRangeStart,
  FIXED_PORT_BLOCKS_START,
  randomSuffix,
  type ServiceProcess,
  spawnTsProcess,
  TEST_DATABASE_URL,
  TEST_NATS_URL,
  testWallets,
  waitFor,
} from '@paygate/testing';
import { Contract, JsonRpcProvider, Wallet } from 'ethers';
import { resetDevState } from '../dev/reset';
import { DEMO } from '../dev/summary';
import routeTable from '../routes.json';

const id = randomSuffix(3);
const NAMESPACE = `devtwice${id}`;
const SCHEMA_PREFIX = `devtwice_${id}_`;
const SCHEMAS = ['registry', 'gateway', 'checkout', 'indexer', 'ledger', 'settlement', 'notifier'].map(
  (schema) => `${SCHEMA_PREFIX}${schema}`,
);
/** Every port the runner opens, before its offset: edge, services, demo page and API, chain. */
const BASE_PORTS = [8080, ...Object.values(routeTable.services).map((s) => s.port), 8090, 8091, 8545];

function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '0.0.0.0', () => server.close(() => resolve(true)));
  });
}

async function allFree(offset: number): Promise<boolean> {
  for (const port of BASE_PORTS) if (!(await portIsFree(port + offset))) return false;
  return true;
}

/**
 * An offset that puts every port of the runner in the band of fixed port blocks: below the ephemeral range (where
 * any process may take a port at any moment: a busy machine's runs failed with EADDRINUSE there) and above the
 * restartable servers' band of the fault tests running beside this one.
 */
async function freeOffset(): Promise<number> {
  const lowest = FIXED_PORT_BLOCKS_START - Math.min(...BASE_PORTS);
  const slots = Math.floor((ephemeralRangeStart() - 1 - Math.max(...BASE_PORTS) - lowest) / 10);
  if (slots < 1) throw new Error('no room below the ephemeral port range for the dev runner');
  for (let attempt = 0; attempt < 20; attempt++) {
    const offset = lowest + Math.floor(Math.random() * slots) * 10;
    if (await allFree(offset)) return offset;
  }
  throw new Error('no free block of ports for the dev runner');
}

/** A WebSocket as the widget opens it, through the edge to the notifier, held open (raw upgrade, no library). */
function openWidgetSocket(edgePort: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(edgePort, '127.0.0.1', () => {
      socket.write(
        [
          'GET /api/v1/ws HTTP/1.1',
          `Host: 127.0.0.1:${edgePort}`,
          'Upgrade: websocket',
          'Connection: Upgrade',
          `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}`,
          'Sec-WebSocket-Version: 13',
          '',
          '',
        ].join('\r\n'),
      );
    });
    socket.once('data', (chunk) => {
      if (chunk.toString().startsWith('HTTP/1.1 101')) resolve(socket);
      else reject(new Error(`no upgrade: ${chunk.toString().split('\r\n')[0]}`));
    });
    socket.once('error', reject);
    socket.on('error', () => undefined);
  });
}

/** A keep-alive HTTP connection that asked one question and stays open. */
function openKeepAlive(port: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => {
      socket.write(`GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: keep-alive\r\n\r\n`);
    });
    socket.once('data', () => resolve(socket));
    socket.once('error', reject);
    socket.on('error', () => undefined);
  });
}

/** What "within seconds" means here, on a busy 2-core machine. */
const STOP_WITHIN_MS = 12_000;

function tail(output: string, lines = 40): string {
  return output.split('\n').slice(-lines).join('\n');
}

describe('make dev, twice in a row', () => {
  let offset: number;
  let runner: ServiceProcess | undefined;

  beforeAll(async () => {
    offset = await freeOffset();
  });

  afterAll(async () => {
    await runner?.kill('SIGKILL');
    await resetDevState({ databaseUrl: TEST_DATABASE_URL, natsUrl: TEST_NATS_URL }, NAMESPACE, SCHEMAS);
  });

  /** The demo seller's secret key: the runner writes it to .dev/demo-seller-key-<namespace> (never to the console). */
  const demoSellerKey = () =>
    readFileSync(path.join(__dirname, `../../.dev/demo-seller-key-${NAMESPACE}`), 'utf8').trim();
  /** A skill run 1 adds beside the demo skills; run 2 must not show it. */
  const LEFTOVER = 'devtwice-leftover';

  interface RunResult {
    txHash: string;
    payoutTxHash: string;
    settledBy: 'settle-now' | 'scheduler';
  }

  async function runAndPay(run: number): Promise<RunResult> {
    runner = spawnTsProcess('deploy/dev/main.ts', {
      DATABASE_URL: TEST_DATABASE_URL,
      NATS_URL: TEST_NATS_URL,
      DEV_PORT_OFFSET: String(offset),
      DEV_NAMESPACE: NAMESPACE,
      DEV_SCHEMA_PREFIX: SCHEMA_PREFIX,
      LOG_LEVEL: 'warn',
      // The runner's services share the suites' Postgres (100 connections): with production's pools (10 each,
      // idle for 30 s) its seven services could hold 70, and a clean-clone run peaked at 90 while it started.
      DB_POOL_SIZE: '3',
      DB_IDLE_TIMEOUT_MS: '5000',
    });
    const current = runner;
    const started = await Promise.race([
      waitFor(() => current.output().includes('Paygate is running'), {
        timeoutMs: 150_000,
        intervalMs: 250,
      }).then(() => true),
      current.exited.then(() => false),
    ]).catch(() => false);
    if (!started) throw new Error(`run ${run}: the dev runner did not start:\n${tail(current.output())}`);
    // What the runner prints: the operator token and the demo seller.
    const summary = current.output();
    const operatorToken = /operator token\s+(\S+)/.exec(summary)?.[1];
    const demoSeller = /Demo seller\S*\s+(0x[0-9a-fA-F]{40}) \(([^)\s]+)\)/.exec(summary);
    if (!operatorToken || !demoSeller)
      throw new Error(`run ${run}: no operator token or demo seller in:\n${summary}`);
    const [, sellerAddress, sellerId] = demoSeller as unknown as [string, string, string];
    const edge = `http://127.0.0.1:${8080 + offset}`;
    const asOperator = { authorization: `Bearer ${operatorToken}`, 'content-type': 'application/json' };
    const catalogNames = async () => {
      const catalog = (await fetch(`${edge}/api/v1/skills?limit=100`).then((r) => r.json())) as {
        data: Array<{ name: string }>;
        nextCursor: string | null;
      };
      expect(catalog.nextCursor).toBeNull();
      return catalog.data.map((skill) => skill.name);
    };

    // The public catalog: exactly the demo skills, once each (nothing left from an earlier run).
    const demoSkills = [DEMO.productSkill, DEMO.apiSkill].sort();
    expect(await catalogNames()).toEqual(demoSkills);
    if (run === 1) {
      // Something the next run must not show.
      await createActiveSkill(`http://127.0.0.1:${8081 + offset}`, demoSellerKey(), {
        name: LEFTOVER,
        type: 'API',
        mode: 'PROXY',
        apiBaseUrl: `http://127.0.0.1:${8091 + offset}`,
        endpoints: [{ path: '/forecast', method: 'GET', priceUsdc: '0.02' }],
      });
      expect(await catalogNames()).toEqual([...demoSkills, LEFTOVER].sort());
    }

    const provider = new JsonRpcProvider(`http://127.0.0.1:${8545 + offset}`, 31337, { staticNetwork: true });
    try {
      const agent = createAgent({
        wallet: new Wallet(testWallets.buyer.privateKey, provider),
        maxPricePerCall: '0.10',
        maxTotalSpend: '1.00',
      });
      const url = `${edge}/api/v1/skills/${DEMO.apiSkill}${DEMO.apiPath}?city=Porto`;
      const response = await agent.fetch(url);
      const body = await response.text();
      if (response.status !== 200)
        throw new Error(
          `run ${run}: paid call answered ${response.status} ${body}\n${tail(current.output())}`,
        );
      expect(agent.payments).toHaveLength(1);
      const { txHash } = agent.payments[0]!;
      // The demo API shows the payment it received: the tx hash this agent paid with.
      expect(JSON.parse(body)).toMatchObject({ city: 'Porto', forecast: 'sunny', paidWith: txHash });

      // The operator settles now: the demo seller (the only seller) is paid 95% of one cent on this chain.
      // Until the ledger has the payment available the seller is skipped (asked again on the next call); in
      // the rare case that a 2-minute period starts meanwhile, the scheduler (every 10 s) pays it first and
      // settle-now answers with that payout.
      let settledBy: RunResult['settledBy'] = 'settle-now';
      const payout = await waitFor(
        async () => {
          const answer = await fetch(`${edge}/api/v1/operator/settlements/run`, {
            method: 'POST',
            headers: asOperator,
            body: JSON.stringify({ all: true, waitMs: 20_000 }),
          });
          expect(answer.status).toBe(200);
          const result = (await answer.json()) as { settled: any[]; skipped: any[] };
          expect([...result.settled, ...result.skipped].map((s) => s.sellerId)).toEqual([sellerId]);
          if (result.settled.length === 1) return result.settled[0];
          const [skipped] = result.skipped;
          if (skipped.reason === 'already_settled_this_period') {
            settledBy = 'scheduler';
            return skipped.status === 'completed' ? skipped : undefined;
          }
          expect(skipped.reason).toBe('nothing_available');
          return undefined;
        },
        { timeoutMs: 60_000, intervalMs: 500, message: `run ${run}: settle-now paid the demo seller` },
      );
      expect(payout).toMatchObject({ sellerId, status: 'completed', txHash: expect.stringMatching(/^0x/) });
      if (settledBy === 'settle-now')
        expect(payout).toMatchObject({ amount: '0.0095', payoutAddress: sellerAddress });
      // On this run's chain: mined, and the seller (no USDC on a new chain) holds exactly the payout.
      const receipt = await provider.getTransactionReceipt(payout.txHash);
      expect(receipt?.status).toBe(1);
      const usdc = new Contract(receipt!.to!, usdcAbi, provider);
      expect(await usdc.getFunction('balanceOf')(sellerAddress)).toBe(9_500n);

      // The ledger agrees with the new chain: 1 cent in, 0.95 cent out, the 5% fee left in escrow.
      const report = await waitFor(
        async () => {
          const answer = await fetch(`${edge}/api/v1/reconciliation`, { headers: asOperator });
          const result = (await answer.json()) as any;
          return answer.status === 200 && result.difference === '0' && result.balanced ? result : undefined;
        },
        { timeoutMs: 30_000, intervalMs: 500, message: `run ${run}: reconciliation difference 0` },
      );
      expect(report).toMatchObject({ chainBalance: '0.0005', ledgerBalance: '0.0005', differences: [] });
      return { txHash, payoutTxHash: payout.txHash, settledBy };
    } finally {
      provider.destroy();
    }
  }

  async function stopCleanly(signal: 'SIGTERM' | 'SIGINT'): Promise<void> {
    const current = runner!;
    // What an hour in a browser leaves behind: the widget's live socket and keep-alive connections.
    const sockets = [
      await openWidgetSocket(8080 + offset),
      await openKeepAlive(8080 + offset),
      await openKeepAlive(8090 + offset),
      await openKeepAlive(routeTable.services.notifier.port + offset),
    ];
    try {
      const signalledAt = Date.now();
      current.child.kill(signal);
      const exitCode = await Promise.race([
        current.exited,
        new Promise<'still running'>((resolve) => setTimeout(() => resolve('still running'), STOP_WITHIN_MS)),
      ]);
      expect({ signal, exitCode }).toEqual({ signal, exitCode: 0 });
      // Nothing it started is left listening: services, chain, demo and edge are gone.
      await waitFor(() => allFree(offset), {
        timeoutMs: Math.max(1000, STOP_WITHIN_MS - (Date.now() - signalledAt)),
        intervalMs: 200,
        message: `every dev port free again after ${signal}`,
      });
    } finally {
      for (const socket of sockets) socket.destroy();
    }
    runner = undefined;
  }

  it('pays the demo skill through the edge, settles and reconciles on each run, and stops everything each time', async () => {
    const first = await runAndPay(1);
    await stopCleanly('SIGTERM');
    const second = await runAndPay(2);
    await stopCleanly('SIGINT');
    console.log(
      `dev runner twice on ports +${offset}: run 1 paid in ${first.txHash} and paid out in ${first.payoutTxHash} (${first.settledBy}), run 2 paid in ${second.txHash} and paid out in ${second.payoutTxHash} (${second.settledBy}); both answered 200, reconciled to 0 and stopped on a signal with sockets open`,
    );
  }, 400_000);
});
