/**
 * A chaos run's system, brought up: the run's own Postgres, a 3-node NATS cluster with 3-replica streams, anvil
 * with the test USDC behind the RPC fault proxy, the webhook receiver, the sellers' upstream, the balancer and each
 * service's replicas, then the sellers set up (half of them matching checkout sessions by deposit address, checkout
 * told before the load begins) and the buyers funded. Everything started registers its stop with
 * the run, which stops them in the reverse order.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  ADMIN_USER,
  anchorStreamStore,
  type Bus,
  connectBus,
  ensureStreams,
  findNatsServerBinary,
  generateNatsPasswords,
  isTransientJetStreamError,
  type NatsPasswords,
} from '@paygate/bus';
import { retryStartup } from '@paygate/runtime';
import { type AnvilInstance, deployTestUsdc, startAnvil } from '@paygate/testing';
import { buildServiceBundles } from '@paygate/testing/service-bundles';
import type { Wallet } from 'ethers';
import pg from 'pg';
import { ALL_SERVICES } from '../service-schemas';
import { Balancer } from './balancer';
import { NatsCluster } from './nats-cluster';
import {
  awaitCheckoutMatching,
  awaitFailingRoutes,
  FAILING_PATHS,
  fundBuyers,
  type Seller,
  type SellerFailureKind,
  setUpSellers,
} from './participants';
import { ChaosPostgres } from './postgres';
import type { Prng } from './prng';
import type { ChaosProfile } from './profiles';
import { createReplicas, type Replica } from './replicas';
import { RpcFaultProxy } from './rpc-proxy';
import { serviceEnv } from './service-env';
import { WebhookReceiver } from './webhook-receiver';

/** One run as it goes: its seed and profile, its randomness, its directory, and the stops of what it started. */
export interface ChaosRun {
  seed: number;
  profile: ChaosProfile;
  prng: Prng;
  /** The load's draws: the sellers' set-up, then the operations. */
  loadPrng: Prng;
  log: (line: string) => void;
  started: number;
  dir: string;
  namespace: string;
  stops: Array<() => Promise<void>>;
}

export interface ChaosSystem {
  postgres: ChaosPostgres;
  nats: NatsCluster;
  anvil: AnvilInstance;
  /** The NATS admin connection (the events stream's name, for the faults). */
  admin: Bus;
  usdcAddress: string;
  rpcProxy: RpcFaultProxy;
  webhooks: WebhookReceiver;
  upstream: http.Server;
  balancer: Balancer;
  replicas: Replica[];
}

export interface Participants {
  sellers: Seller[];
  buyers: Wallet[];
  /** Funded like the buyers; they only pay calls their seller fails. */
  failingAgents: Wallet[];
  startupSeconds: number;
}

const since = (t: number) => `${((Date.now() - t) / 1000).toFixed(1)} s`;

/** Start the system: every part running and ready, the sellers set up and the buyers funded. */
export async function startSystem(
  run: ChaosRun,
): Promise<{ system: ChaosSystem; participants: Participants }> {
  const infrastructure = await startInfrastructure(run);
  const system = await startRunParts(run, infrastructure);
  // The buyers are funded while the services start (the chain is all they need).
  const funding = fundBuyers(
    system.anvil.rpcUrl,
    system.usdcAddress,
    run.profile.buyers + run.profile.failingAgents,
  );
  funding.catch(() => undefined);
  await startReplicas(system.replicas);
  run.log(`${system.replicas.length} replicas ready (${since(run.started)})`);
  const sellers = await setUpSellers({
    baseUrl: system.balancer.url,
    count: run.profile.sellers,
    upstreamUrl: `http://127.0.0.1:${(system.upstream.address() as AddressInfo).port}`,
    webhookUrl: system.webhooks.url,
    prng: run.loadPrng,
  });
  const client = new pg.Client({ connectionString: system.postgres.url });
  await client.connect();
  try {
    await awaitCheckoutMatching(client, sellers, 60_000);
  } finally {
    await client.end().catch(() => undefined);
  }
  await awaitFailingRoutes(system.balancer.url, sellers, 60_000);
  const wallets = await funding;
  const buyers = wallets.slice(0, run.profile.buyers);
  const failingAgents = wallets.slice(run.profile.buyers);
  const startupSeconds = Math.round((Date.now() - run.started) / 1000);
  run.log(
    `${sellers.length} sellers, ${buyers.length} buyers, ${failingAgents.length} failing agents; start-up took ${startupSeconds} s; faults begin`,
  );
  return { system, participants: { sellers, buyers, failingAgents, startupSeconds } };
}

/** What does not depend on anything else starts at once: Postgres, the NATS cluster, the chain, the build. */
async function startInfrastructure(run: ChaosRun) {
  const { log, started, stops, dir, namespace } = run;
  const binary = findNatsServerBinary();
  if (!binary) throw new Error('nats-server is not installed (apt-get install nats-server)');
  const passwords: NatsPasswords = generateNatsPasswords();
  const [postgres, nats, anvil, buildMs] = await allStarted([
    ChaosPostgres.start(dir).then((pgServer) => {
      stops.push(() => pgServer.stop());
      log(`postgres on ${pgServer.port} (${since(started)})`);
      return pgServer;
    }),
    NatsCluster.start({ binary, dir, namespace, passwords }).then((cluster) => {
      stops.push(() => cluster.stop());
      log(`nats cluster up (${since(started)})`);
      return cluster;
    }),
    startAnvil({ blockTimeSec: 1 }).then((chain) => {
      stops.push(() => chain.stop());
      return chain;
    }),
    buildServiceBundles(ALL_SERVICES, 'chaos'),
  ] as const);
  log(`services compiled in ${buildMs} ms`);
  const admin = await connectBus({
    url: nats.url,
    namespace,
    name: 'chaos-admin',
    user: ADMIN_USER,
    password: passwords[ADMIN_USER],
  });
  stops.push(() => admin.close());
  // The new cluster may still be placing its first streams (a request timed out in a full jest run): a request
  // that got no answer is asked again, as the services' own start-up does.
  await retryStartup(
    async () => {
      await anchorStreamStore(admin.jsm);
      await ensureStreams(admin, { replicas: 3 });
    },
    {
      what: 'the streams of the NATS cluster',
      attempts: 6,
      logger: { warn: log },
      retryable: isTransientJetStreamError,
    },
  );
  log(`nats cluster ${nats.url}, streams with 3 replicas`);
  return { postgres, nats, anvil, admin, passwords };
}

/** The USDC, the RPC proxy, the webhook receiver, the upstream, the balancer and the replicas (not started yet). */
async function startRunParts(
  run: ChaosRun,
  infrastructure: Awaited<ReturnType<typeof startInfrastructure>>,
): Promise<ChaosSystem> {
  const { passwords, ...running } = infrastructure;
  const { postgres, nats, anvil } = running;
  const { stops, profile } = run;
  const { address: usdcAddress } = await deployTestUsdc(anvil.rpcUrl);
  const rpcProxy = await RpcFaultProxy.start(anvil.rpcUrl, run.prng.fork('rpc'));
  stops.push(() => rpcProxy.stop());
  const webhooks = await WebhookReceiver.start(run.prng.fork('webhooks'));
  stops.push(() => webhooks.stop());
  const upstream = await startUpstream();
  stops.push(
    () =>
      new Promise<void>((resolve) => {
        upstream.closeAllConnections();
        upstream.close(() => resolve());
      }),
  );
  // The balancer's URL is every service's PUBLIC_BASE_URL; it learns the replicas once they exist.
  const replicas: Replica[] = [];
  const balancer = await Balancer.start(replicas, profile.balancerTryTimeoutMs);
  stops.push(() => balancer.stop());
  const envFor = (service: string) =>
    serviceEnv(service, {
      databaseUrl: postgres.url,
      natsUrl: nats.url,
      namespace: run.namespace,
      passwords,
      publicBaseUrl: balancer.url,
      rpcUrl: profile.rpcThroughProxy === false ? anvil.rpcUrl : rpcProxy.url,
      chainId: anvil.chainId,
      usdcAddress,
    });
  for (const service of ALL_SERVICES) {
    replicas.push(...(await createReplicas([service], profile.replicas[service] ?? 2, envFor)));
  }
  // The run is over when these stop: a kill, not a graceful stop (nothing they would still do is checked).
  stops.push(async () => {
    await Promise.all(replicas.map((r) => r.kill9()));
  });
  return { ...running, usdcAddress, rpcProxy, webhooks, upstream, balancer, replicas };
}

/** The first replica of each service migrates its schema; the others start once it is ready. */
async function startReplicas(replicas: Replica[]): Promise<void> {
  const firsts = replicas.filter((r) => r.index === 1);
  for (const replica of firsts) replica.start();
  await Promise.all(firsts.map((r) => r.waitReady(240_000)));
  const rest = replicas.filter((r) => r.index > 1);
  for (const replica of rest) replica.start();
  await Promise.all(rest.map((r) => r.waitReady(240_000)));
}

/** Like Promise.all, but waits for every one (so each started part has registered its stop) before failing. */
async function allStarted<T extends readonly unknown[]>(
  parts: T,
): Promise<{ -readonly [K in keyof T]: Awaited<T[K]> }> {
  const settled = await Promise.allSettled(parts);
  const failed = settled.find((r) => r.status === 'rejected');
  if (failed) throw (failed as PromiseRejectedResult).reason;
  return settled.map((r) => (r as PromiseFulfilledResult<unknown>).value) as {
    -readonly [K in keyof T]: Awaited<T[K]>;
  };
}

/**
 * The sellers' API behind the gateway: answers every call, except the failing skill's paid routes (FAILING_PATHS),
 * which fail the way a broken seller does: a 500, no answer until the gateway's UPSTREAM_TIMEOUT_MS, or the
 * connection dropped before any answer. The registry's validation pings (HEAD) are answered, so the skill is active.
 */
function startUpstream(): Promise<http.Server> {
  const server = http.createServer((req, res) => {
    const failure = req.method === 'HEAD' ? undefined : failureOf(req.url ?? '');
    if (failure === 'status500') {
      res.writeHead(500, { 'content-type': 'application/json' });
      res.end('{"error":"the seller broke"}');
      return;
    }
    // Never answered: the gateway gives up after its upstream timeout and closes the connection.
    if (failure === 'timeout') return;
    if (failure === 'connectionDropped') {
      req.socket.destroy();
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{"ok":true}');
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

function failureOf(url: string): SellerFailureKind | undefined {
  const path = url.split('?')[0];
  return (Object.keys(FAILING_PATHS) as SellerFailureKind[]).find((kind) => FAILING_PATHS[kind] === path);
}
