/**
 * `make dev`: the whole system on one machine. Finds or starts Postgres and NATS, starts anvil with the test
 * USDC, the seven services and the edge (one public base URL), then a demo seller; prints where everything is.
 * Ctrl-C (or SIGTERM) stops everything it started within seconds (shutdown.ts: bounded steps, a hard deadline).
 *
 * Every run starts from state that matches its new chain: the services run in their own dev schemas
 * (DB_SCHEMA = schema prefix + schema) and event namespace, both dropped first. DEV_PORT_OFFSET shifts every port
 * (edge, services, chain, demo) and names the schemas and streams (system.ts: 1000 gives dev1000_* and dev1000),
 * so a second system runs beside the first; a run on names another running system holds refuses to start.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { NatsPasswords } from '@paygate/bus';
import { buildServiceBundles, serviceBundleCommand } from '@paygate/testing/service-bundles';
import { HDNodeWallet } from 'ethers';
import routeTable from '../routes.json';
import { startLocalChain } from '../scripts/start-local-chain';
import { SCHEMAS } from '../service-schemas';
import { bootstrapDemo } from './bootstrap';
import { startEdge } from './edge';
import { ensureInfrastructure } from './infrastructure';
import { resetDevState } from './reset';
import { DevShutdown } from './shutdown';
import { browserPortWarnings, renderDevSummary } from './summary';
import { devSystem } from './system';

/**
 * Development only: each checkout session gets its own deposit address, a child of this node of anvil's public
 * mnemonic (account 1', so no child is one of anvil's funded accounts). Checkout gets only the xpub; settlement
 * the mnemonic, to sign the sweeps. Production refuses both (deploy/test/production-guards.test.ts).
 */
const DEV_DEPOSIT_MNEMONIC = 'test test test test test test test test test test test junk';
const DEV_DEPOSIT_PATH = "m/44'/60'/1'/0";
const DEV_DEPOSIT_XPUB = HDNodeWallet.fromPhrase(DEV_DEPOSIT_MNEMONIC, undefined, DEV_DEPOSIT_PATH).neuter()
  .extendedKey;

const REPO_ROOT = path.join(__dirname, '../..');
/** DEV_PORT_OFFSET and the schemas and event namespace it names (DEV_SCHEMA_PREFIX, DEV_NAMESPACE when set). */
const SYSTEM = (() => {
  try {
    return devSystem();
  } catch (error) {
    console.error(`\x1b[31m[dev] ${(error as Error).message}\x1b[0m`);
    process.exit(1);
  }
})();
const PORT_OFFSET = SYSTEM.portOffset;
const EDGE_PORT = Number(process.env.EDGE_PORT ?? 8080 + PORT_OFFSET);
const CHAIN_PORT = Number(process.env.CHAIN_PORT ?? 8545 + PORT_OFFSET);
const PUBLIC_BASE_URL = process.env.PUBLIC_BASE_URL ?? `http://localhost:${EDGE_PORT}`;
// Dev-only secrets: fixed, published in this repository, never used outside `make dev`.
const DEV_OPERATOR_TOKEN = 'dev-operator-token-not-secret';
const DEV_SESSION_SECRET = 'dev-session-secret-not-secret-0123456789';

const DEV_NAMESPACE = SYSTEM.namespace;
const DEV_SCHEMA_PREFIX = SYSTEM.schemaPrefix;

const COLORS = [31, 32, 33, 34, 35, 36, 91, 92];

function log(line: string): void {
  console.log(`\x1b[1m[dev]\x1b[0m ${line}`);
}

function startServiceProcess(
  name: string,
  port: number,
  env: NodeJS.ProcessEnv,
  color: number,
): ChildProcess {
  const bundle = serviceBundleCommand(name, 'dev');
  const child = spawn(process.execPath, bundle.args, {
    cwd: REPO_ROOT,
    env: { ...process.env, ...env, ...bundle.env, PORT: String(port) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const prefix = `\x1b[${color}m${name.padEnd(14)}\x1b[0m`;
  const relay = (chunk: Buffer) => {
    for (const line of chunk.toString().split('\n')) if (line.trim()) console.log(`${prefix} ${line}`);
  };
  child.stdout!.on('data', relay);
  child.stderr!.on('data', relay);
  child.once('exit', (code, signal) => {
    if (!shutdown.isStopping) log(`${name} exited (${signal ?? code}); see its lines above`);
  });
  return child;
}

async function waitReady(name: string, port: number, timeoutMs = 90_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    try {
      const response = await fetch(`http://127.0.0.1:${port}/readyz`, { signal: AbortSignal.timeout(1000) });
      if (response.ok) return;
    } catch {
      // not up yet
    }
    await new Promise((r) => setTimeout(r, 300));
  }
  throw new Error(`${name} did not become ready on port ${port} within ${timeoutMs} ms`);
}

const shutdown = new DevShutdown({ log });

async function main(): Promise<void> {
  shutdown.listen();
  const services = Object.entries(routeTable.services) as Array<[string, { port: number }]>;
  // Built while Postgres, NATS and the chain come up: a service starts from its bundle in a fifth of the CPU
  // tsx needs (@paygate/testing/service-bundles); a run builds again only the bundles whose sources changed.
  const bundlesBuilt = buildServiceBundles(
    services.map(([name]) => name),
    'dev',
  );
  bundlesBuilt.catch(() => undefined); // awaited below; a failure is reported there

  try {
    const pagePort = Number(process.env.DEMO_PAGE_PORT ?? 8090 + PORT_OFFSET);
    for (const warning of browserPortWarnings({ edge: EDGE_PORT, 'demo page': pagePort })) {
      log(`\x1b[33mwarning: ${warning}\x1b[0m`);
    }
    const infra = await ensureInfrastructure(log, {
      authorizedNatsNamespace: DEV_NAMESPACE,
      system: { ...SYSTEM, holder: `make dev (edge :${EDGE_PORT}, pid ${process.pid})` },
    });
    shutdown.add('Postgres and NATS', infra.stop);
    for (const server of infra.processes) shutdown.killOnAbort(server);
    // The local chain is new on every run, so everything that refers to it starts fresh too.
    // `make dev` prefixes each service's schema (dev_, dev1000_ for offset 1000) so it never touches another
    // setup's data; ensureInfrastructure holds the prefix, so no other running system has these schemas.
    const schemaOf = (service: string) => `${DEV_SCHEMA_PREFIX}${SCHEMAS[service]}`;
    const devSchemas = Object.keys(SCHEMAS).map(schemaOf);
    await resetDevState(infra, DEV_NAMESPACE, devSchemas);
    log(`fresh dev state: schemas ${devSchemas.join(', ')}, event namespace ${DEV_NAMESPACE}`);
    const chain = await startLocalChain({
      port: CHAIN_PORT,
      blockTimeSec: Number(process.env.BLOCK_TIME_SEC ?? 1),
    });
    shutdown.add('the local chain', chain.stop);
    log(`local chain: ${chain.rpcUrl} (chain id ${chain.chainId}), test USDC at ${chain.usdcAddress}`);

    const commonEnv: NodeJS.ProcessEnv = {
      DATABASE_URL: infra.databaseUrl,
      NATS_URL: infra.natsUrl,
      EVENT_NAMESPACE: DEV_NAMESPACE,
      PUBLIC_BASE_URL,
      CHAIN_RPC_URL: chain.rpcUrl,
      CHAIN_NETWORK: 'local',
      CHAIN_ID: String(chain.chainId),
      USDC_ADDRESS: chain.usdcAddress,
      ESCROW_ADDRESS: chain.wallets.escrow.address,
      // Each checkout session is paid to its own deposit address (a child of this xpub), never to the agent
      // escrow; the old shared deposit wallet (anvil account #7) only matches sessions from before.
      CHECKOUT_DEPOSIT_XPUB: DEV_DEPOSIT_XPUB,
      CHECKOUT_ESCROW_ADDRESS: chain.wallets.checkoutEscrow.address,
      CONFIRMATIONS: '1',
      OPERATOR_TOKEN: DEV_OPERATOR_TOKEN,
      SESSION_SECRET: DEV_SESSION_SECRET,
      // A payout address the wallet signs takes effect at once here (production waits 48 h by default).
      PAYOUT_ADDRESS_DELAY_MS: '0',
      LOG_LEVEL: process.env.LOG_LEVEL ?? 'info',
      NODE_ENV: 'development',
    };
    log(`services bundled in ${await bundlesBuilt} ms`);
    const children: ChildProcess[] = [];
    const portOf = (routesPort: number) => routesPort + PORT_OFFSET;
    services.forEach(([name, { port }], i) => {
      const env: NodeJS.ProcessEnv = { ...commonEnv, DB_SCHEMA: schemaOf(name) };
      // Each service connects as its own NATS user, allowed exactly its subjects (libs/bus permissions.ts).
      if (infra.natsPasswords) {
        env.NATS_USER = name;
        env.NATS_PASSWORD = infra.natsPasswords[name as keyof NatsPasswords];
      }
      // Only settlement holds the escrow wallet's key, the session deposit addresses' (swept into escrow
      // through the relayer), the old checkout deposit wallet's and the x402 relayer's (gas only, account #6).
      if (name === 'settlement') {
        env.ESCROW_PRIVATE_KEY = chain.wallets.escrow.privateKey;
        env.CHECKOUT_DEPOSIT_MNEMONIC = DEV_DEPOSIT_MNEMONIC;
        env.CHECKOUT_DEPOSIT_PATH = DEV_DEPOSIT_PATH;
        env.CHECKOUT_ESCROW_PRIVATE_KEY = chain.wallets.checkoutEscrow.privateKey;
        env.RELAYER_PRIVATE_KEY = chain.wallets.relayer.privateKey;
        // Where the operator's platform payout sends the platform's revenue (anvil account #4).
        env.TREASURY_ADDRESS = chain.wallets.platform.address;
        // Development only: 2-minute settlement periods, looked for every 10 s, so a payout shows within minutes.
        env.SETTLEMENT_PERIOD_SECONDS = '120';
        env.SCHEDULER_INTERVAL_MS = '10000';
      }
      // The demo skills hold nothing: a paid call's payment is available 15 s after its claim (the gateway's 10 s
      // upstream timeout and its report; production 30 s), looked for every second. A paid call its seller failed
      // comes back within a minute: a 30 s retry window (production 600 s), unserved calls decided every second,
      // and refunds below the threshold sent after a minute (production a day).
      if (name === 'escrow-ledger') {
        env.CALL_OUTCOME_WINDOW_MS = '15000';
        env.RELEASE_INTERVAL_MS = '1000';
        env.UNSERVED_SWEEP_INTERVAL_MS = '1000';
        env.UNSERVED_REFUND_MAX_AGE_MS = '60000';
      }
      if (name === 'gateway-proxy') env.RETRY_WINDOW_SECONDS = '30';
      children.push(startServiceProcess(name, portOf(port), env, COLORS[i % COLORS.length]!));
    });
    for (const child of children) shutdown.track(child);
    shutdown.add('the services', async () => {
      await Promise.all(
        children.map(
          (child) =>
            new Promise<void>((resolve) => {
              if (child.exitCode !== null || child.signalCode !== null) return resolve();
              child.once('exit', () => resolve());
              child.kill('SIGTERM');
              setTimeout(() => child.kill('SIGKILL'), 3000).unref();
            }),
        ),
      );
    });
    await Promise.all(services.map(([name, { port }]) => waitReady(name, portOf(port))));
    const demo = await bootstrapDemo({
      publicBaseUrl: PUBLIC_BASE_URL,
      registryUrl: `http://127.0.0.1:${portOf(routeTable.services.registry.port)}`,
      apiPort: Number(process.env.DEMO_API_PORT ?? portOf(8091)),
      pagePort,
      chain,
      operatorToken: DEV_OPERATOR_TOKEN,
      log,
    });
    shutdown.add('the demo seller', demo.stop);
    const edge = await startEdge({
      port: EDGE_PORT,
      upstreams: Object.fromEntries(
        services.map(([name, { port }]) => [name, `http://127.0.0.1:${portOf(port)}`]),
      ),
      extraPrefixes: demo.edgePrefixes,
    });
    shutdown.trackServer('the edge', edge);

    // The demo seller's secret key goes to a file only its owner can read, never to the console or a log; a
    // second system beside the first writes its own.
    const sellerKeyFile = path.join(
      REPO_ROOT,
      '.dev',
      DEV_NAMESPACE === 'dev' ? 'demo-seller-key' : `demo-seller-key-${DEV_NAMESPACE}`,
    );
    mkdirSync(path.dirname(sellerKeyFile), { recursive: true });
    writeFileSync(sellerKeyFile, `${demo.seller.apiKey}\n`, { mode: 0o600 });
    console.log(
      renderDevSummary({
        sellerKeyFile: path.relative(process.cwd(), sellerKeyFile),
        publicBaseUrl: PUBLIC_BASE_URL,
        operatorToken: DEV_OPERATOR_TOKEN,
        chain,
        infra,
        eventNamespace: DEV_NAMESPACE,
        seller: demo.seller,
        pageUrl: demo.pageUrl,
      }),
    );
  } catch (error) {
    console.error(`\x1b[31m[dev] ${(error as Error).message}\x1b[0m`);
    await shutdown.stop(1, 'start-up failed');
  }
}

void main();
