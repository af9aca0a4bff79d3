/**
 * `make dev` twice in a row: the real dev runner (deploy/dev/main.ts) starts a new chain each time, so each run
 * must start from state that matches it. Each run pays the demo skill through the edge as an agent and gets 200;
 * the second run repeats the first one's payments from the same deterministic keys on a new chain (often the
 * very same tx hash), which only works on fresh schemas and streams. Both runs stop cleanly: exit code 0 and every port free again.
 *
 *   npx jest deploy/test/dev-twice
 */
import net from 'node:net';
import { createAgent } from '@paygate/agent-client';
import {
  randomSuffix,
  type ServiceProcess,
  spawnTsProcess,
  TEST_DATABASE_URL,
  TEST_NATS_URL,
  testWallets,
  waitFor,
} from '@paygate/testing';
import { JsonRpcProvider, Wallet } from 'ethers';
import { resetDevState } from '../dev/reset';
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

async function freeOffset(): Promise<number> {
  for (let attempt = 0; attempt < 20; attempt++) {
    const offset = 20_000 + Math.floor(Math.random() * 3000) * 10;
    if (await allFree(offset)) return offset;
  }
  throw new Error('no free block of ports for the dev runner');
}

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

  async function runAndPay(run: number): Promise<{ txHash: string; body: string }> {
    runner = spawnTsProcess('deploy/dev/main.ts', {
      DATABASE_URL: TEST_DATABASE_URL,
      NATS_URL: TEST_NATS_URL,
      DEV_PORT_OFFSET: String(offset),
      DEV_NAMESPACE: NAMESPACE,
      DEV_SCHEMA_PREFIX: SCHEMA_PREFIX,
      LOG_LEVEL: 'warn',
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
    const provider = new JsonRpcProvider(`http://127.0.0.1:${8545 + offset}`, 31337, { staticNetwork: true });
    try {
      const agent = createAgent({
        wallet: new Wallet(testWallets.buyer.privateKey, provider),
        maxPricePerCall: '0.10',
        maxTotalSpend: '1.00',
      });
      const url = `http://127.0.0.1:${8080 + offset}/api/v1/skills/demo-weather/forecast?city=Porto`;
      const response = await agent.fetch(url);
      const body = await response.text();
      if (response.status !== 200)
        throw new Error(
          `run ${run}: paid call answered ${response.status} ${body}\n${tail(current.output())}`,
        );
      expect(JSON.parse(body)).toMatchObject({ city: 'Porto', forecast: 'sunny' });
      expect(agent.payments).toHaveLength(1);
      return { txHash: agent.payments[0]!.txHash, body };
    } finally {
      provider.destroy();
    }
  }

  async function stopCleanly(): Promise<void> {
    const code = await runner!.kill('SIGTERM');
    expect(code).toBe(0);
    // Nothing it started is left listening: services, chain, demo and edge are gone.
    await waitFor(() => allFree(offset), { timeoutMs: 10_000, message: 'every dev port free again' });
    runner = undefined;
  }

  it('pays the demo skill through the edge on each run, and stops everything each time', async () => {
    const first = await runAndPay(1);
    await stopCleanly();
    const second = await runAndPay(2);
    await stopCleanly();
    console.log(
      `dev runner twice on ports +${offset}: run 1 paid in ${first.txHash}, run 2 paid in ${second.txHash}; both answered 200`,
    );
  }, 400_000);
});
