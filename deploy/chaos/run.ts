/**
 * One chaos run: the whole system as real processes on loopback (3-node NATS cluster, the run's own Postgres,
 * anvil behind the RPC fault proxy, each service's replicas, a webhook receiver failing half its deliveries),
 * seeded load and faults for a while, then a drain and the invariants. Everything it starts, it stops.
 */
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import {
  ADMIN_USER,
  anchorStreamStore,
  connectBus,
  ensureStreams,
  findNatsServerBinary,
  generateNatsPasswords,
  isTransientJetStreamError,
  type NatsPasswords,
} from '@paygate/bus';
import { retryStartup } from '@paygate/runtime';
import { deployTestUsdc, startAnvil, testWallets } from '@paygate/testing';
import { buildServiceBundles } from '@paygate/testing/service-bundles';
import { Balancer } from './balancer';
import { drainUntilQuiet } from './drain';
import { FAULT_WEIGHTS, type FaultKind, type FaultRecord, runFaults } from './faults';
import { checkInvariants, SCHEMAS } from './invariants';
import { emptyRecord, runLoad } from './load';
import { NatsCluster } from './nats-cluster';
import { changeAccountsMidway, fundBuyers, setUpSellers } from './participants';
import { ChaosPostgres } from './postgres';
import { Prng } from './prng';
import { createReplicas, type Replica, watchCrashes } from './replicas';
import { type RunReport, runReport } from './report';
import { RpcFaultProxy } from './rpc-proxy';
import { OPERATOR_TOKEN, serviceEnv } from './service-env';
import { WebhookReceiver } from './webhook-receiver';

export interface ChaosProfile {
  name: string;
  /** Replicas of each service (chain-indexer's two elect a leader). */
  replicas: Record<string, number>;
  faultSeconds: number;
  operations: number;
  buyers: number;
  sellers: number;
  pauseMs: number;
  drainTimeoutSeconds: number;
  /** The load goes on this long past the last fault (bounded), so recovery after it is measured too. */
  loadTailSeconds: number;
  /** Faults injected at least, the fault phase going on past faultSeconds (at most twice as long) until then. */
  minFaults?: number;
  /** escrow-ledger's PAYOUT_UNCLAIMED_AFTER_MS: below the drain bound, above how late a loaded run claims. */
  payoutUnclaimedAfterMs: number;
  faultWeights?: Partial<Record<FaultKind, number>>;
}

const ALL_SERVICES = Object.keys(SCHEMAS);

export const PROFILES: Record<string, ChaosProfile> = {
  full: {
    name: 'full',
    replicas: Object.fromEntries(ALL_SERVICES.map((s) => [s, 2])),
    // 1,000 operations or more in a run of at most 5 minutes on 2 shared cores: most of an operation's time is
    // waiting for a block (1 s) or for CONFIRMATIONS, so the rate comes from more buyers in parallel, not a
    // shorter pause. The fault phase plus the 120 s drain bound plus start-up stay under the 5 minutes.
    faultSeconds: 135,
    operations: 3000,
    buyers: 56,
    sellers: 4,
    pauseMs: 100,
    drainTimeoutSeconds: 120,
    loadTailSeconds: 20,
    payoutUnclaimedAfterMs: 75_000,
  },
  short: {
    name: 'short',
    // Two of what the short run must show (the gateway behind the balancer, the indexer's leader election);
    // one of the rest, which a busy 2-core machine starts in time.
    replicas: {
      ...Object.fromEntries(ALL_SERVICES.map((s) => [s, 1])),
      'gateway-proxy': 2,
      'chain-indexer': 2,
    },
    // 25 s, not 35: the seed's first five faults (a kill -9 and its restart, the Postgres crash, two freezes)
    // fit, and the ten seconds less of nine loaded replicas were about 2% of `make test`'s CPU.
    faultSeconds: 25,
    // What the short run's test asks of it (more than three faults), on a machine slow enough that one restart
    // takes most of the 25 s.
    minFaults: 4,
    operations: 120,
    buyers: 3,
    sellers: 2,
    pauseMs: 100,
    drainTimeoutSeconds: 90,
    loadTailSeconds: 5,
    // 60 s, not 30: on a slow host with the registry killed for 28 s and Postgres crashed for 8 s, settlement asked to
    // send a payout more than 30 s after reserving it; the ledger had given the reservation back and the settlement
    // failed (nothing lost: the amount went back to the seller's balance). Still well inside the 90 s drain.
    payoutUnclaimedAfterMs: 60_000,
  },
};

/**
 * The short profile with chain reorganisations as the only fault (depth 1–3, half of them dropping their
 * transactions): `CHAOS_PROFILE=reorgs` checks the reorg handling (issue 19: payments booked before CONFIRMATIONS,
 * relayer and escrow transactions dropped and sent again) in a short run instead of waiting for a full run to
 * draw a dropping reorg.
 */
PROFILES.reorgs = {
  ...PROFILES.short!,
  name: 'reorgs',
  faultWeights: Object.fromEntries(
    (Object.keys(FAULT_WEIGHTS) as FaultKind[]).map((kind) => [kind, kind === 'reorg' ? 1 : 0]),
  ),
};

/** The second drain's bound, when an invariant failed right after the first (see runChaos). */
const RECHECK_DRAIN_MS = 30_000;

export async function runChaos(options: {
  seed: number;
  profile: ChaosProfile;
  log?: (line: string) => void;
  /** Where each replica's last 200 log lines are written at the end (for a failed run's post-mortem). */
  logDir?: string;
}): Promise<RunReport> {
  const log = options.log ?? ((line: string) => console.log(`[chaos ${options.seed}] ${line}`));
  const { profile } = options;
  const prng = new Prng(options.seed);
  const started = Date.now();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'paygate-chaos-'));
  // Postgres runs as its own user when this runs as root: it must reach its directory inside.
  chmodSync(dir, 0o755);
  const stops: Array<() => Promise<void>> = [];
  const namespace = `chaos${options.seed.toString(36)}`;
  try {
    log(`seed ${options.seed}, profile ${profile.name}, dir ${dir}`);
    const binary = findNatsServerBinary();
    if (!binary) throw new Error('nats-server is not installed (apt-get install nats-server)');
    const passwords: NatsPasswords = generateNatsPasswords();
    // What does not depend on anything else starts at once: Postgres, the NATS cluster, the chain, the build.
    const since = (t: number) => `${((Date.now() - t) / 1000).toFixed(1)} s`;
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

    const { address: usdcAddress } = await deployTestUsdc(anvil.rpcUrl);
    const rpcProxy = await RpcFaultProxy.start(anvil.rpcUrl, prng.fork('rpc'));
    stops.push(() => rpcProxy.stop());
    const webhooks = await WebhookReceiver.start(prng.fork('webhooks'));
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
    const balancer = await Balancer.start(replicas);
    stops.push(() => balancer.stop());
    const envFor = (service: string) =>
      serviceEnv(service, {
        databaseUrl: postgres.url,
        natsUrl: nats.url,
        namespace,
        passwords,
        publicBaseUrl: balancer.url,
        rpcUrl: rpcProxy.url,
        chainId: anvil.chainId,
        usdcAddress,
        payoutUnclaimedAfterMs: profile.payoutUnclaimedAfterMs,
      });
    for (const service of ALL_SERVICES) {
      replicas.push(...(await createReplicas([service], profile.replicas[service] ?? 2, envFor)));
    }
    // The run is over when these stop: a kill, not a graceful stop (nothing they would still do is checked).
    stops.push(async () => {
      await Promise.all(replicas.map((r) => r.kill9()));
    });
    // The buyers are funded while the services start (the chain is all they need).
    const funding = fundBuyers(anvil.rpcUrl, usdcAddress, profile.buyers);
    funding.catch(() => undefined);
    // The first replica of each service migrates its schema; the others start once it is ready.
    const firsts = replicas.filter((r) => r.index === 1);
    for (const replica of firsts) replica.start();
    await Promise.all(firsts.map((r) => r.waitReady(240_000)));
    const rest = replicas.filter((r) => r.index > 1);
    for (const replica of rest) replica.start();
    await Promise.all(rest.map((r) => r.waitReady(240_000)));
    log(`${replicas.length} replicas ready (${since(started)})`);

    const loadPrng = prng.fork('load');
    const sellers = await setUpSellers({
      baseUrl: balancer.url,
      count: profile.sellers,
      upstreamUrl: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`,
      webhookUrl: webhooks.url,
      prng: loadPrng,
    });
    const buyers = await funding;
    const startupSeconds = Math.round((Date.now() - started) / 1000);
    log(
      `${sellers.length} sellers, ${buyers.length} buyers; start-up took ${startupSeconds} s; faults begin`,
    );

    // As Kubernetes would: a replica that crashed by itself is started again (and counted, in the report).
    const crashWatch = watchCrashes(replicas, log);
    const record = emptyRecord();
    const faults: FaultRecord[] = [];
    const faultStart = Date.now();
    const faultsEnd = faultStart + profile.faultSeconds * 1000;
    let faultsOverAt: number | undefined;
    const load = runLoad({
      baseUrl: balancer.url,
      usdcAddress,
      escrowAddress: testWallets.escrow.address,
      checkoutEscrowAddress: testWallets.checkoutEscrow.address,
      operatorToken: OPERATOR_TOKEN,
      sellers,
      buyers,
      prng: loadPrng,
      operations: profile.operations,
      pauseMs: profile.pauseMs,
      record,
      // The load goes on a little past the faults (bounded), so recovery after the last one is measured.
      shouldStop: () =>
        faultsOverAt !== undefined && Date.now() > faultsOverAt + profile.loadTailSeconds * 1000,
    });
    // Halfway through the faults: one seller rotates its API key, another moves its payout address.
    const accountChanges = changeAccountsMidway({
      baseUrl: balancer.url,
      sellers,
      afterMs: (profile.faultSeconds * 1000) / 2,
      record,
      log,
    });
    await runFaults({
      prng: prng.fork('faults'),
      targets: {
        replicas,
        nats,
        eventsStream: admin.eventsStream,
        postgres,
        chain: anvil.provider,
        rpcProxy,
        triggerSend: async () => {
          const answers = await Promise.all(
            sellers.map((seller) =>
              fetch(`${balancer.url}/api/v1/operator/settlements/run`, {
                method: 'POST',
                headers: { authorization: `Bearer ${OPERATOR_TOKEN}`, 'content-type': 'application/json' },
                body: JSON.stringify({ sellerId: seller.sellerId }),
                signal: AbortSignal.timeout(10_000),
              }).then((r) => r.status),
            ),
          );
          return `settle-now of ${sellers.length} sellers: ${answers.join('/')}`;
        },
      },
      endsAt: faultsEnd,
      minFaults: profile.minFaults,
      // Four schedules' length at most: on a loaded 2-core machine one restart took 34.7 s and a Postgres crash 8.4 s,
      // so twice the 25 s ended a short run at three faults (a red clean-clone run of make test).
      latestEndsAt: faultStart + 4 * profile.faultSeconds * 1000,
      record: faults,
      log,
      weights: profile.faultWeights,
    });
    rpcProxy.clear();
    // Whatever a fault left down comes back: every replica running and thawed, every NATS node up.
    for (const replica of replicas) {
      replica.thaw();
      if (!replica.isRunning()) replica.start();
    }
    for (const node of nats.nodes) if (!nats.isUp(node)) await nats.startNode(node);
    crashWatch.stop();
    const lastFaultAt = Date.now();
    faultsOverAt = lastFaultAt;
    const faultSeconds = Math.round((lastFaultAt - faultStart) / 1000);
    log(`faults over after ${faultSeconds} s (${faults.length}); waiting for the load to finish`);
    await load;
    await accountChanges;

    // Drain: nothing in flight, measured from the last fault (bounded).
    const quietAt = await drainUntilQuiet(
      postgres.url,
      lastFaultAt + profile.drainTimeoutSeconds * 1000,
      log,
    );
    const drainSeconds = quietAt === null ? null : Math.round((quietAt - lastFaultAt) / 1000);
    log(
      drainSeconds === null
        ? 'NOT drained within the bound'
        : `drained ${drainSeconds} s after the last fault`,
    );

    const check = () =>
      checkInvariants({
        databaseUrl: postgres.url,
        baseUrl: balancer.url,
        operatorToken: OPERATOR_TOKEN,
        chain: anvil.provider,
        usdcAddress,
        escrowAddress: testWallets.escrow.address,
        checkoutEscrowAddress: testWallets.checkoutEscrow.address,
        record,
        webhooks,
      });
    let invariants = await check();
    // Work may start after the drain without anyone asking (the scheduler's payouts of a settlement period that
    // ended meanwhile): in flight while the invariants were read, it is not work left behind. The system drains
    // once more (bounded) and every invariant is read again; the first reading's failures stay in the report.
    const failedFirst = invariants
      .filter((i) => i.violations > 0)
      .map((i) => `${i.name}: ${i.examples.join('; ')}`);
    if (failedFirst.length > 0 && drainSeconds !== null) {
      log(
        `an invariant failed right after the drain; draining again and reading them again: ${failedFirst.join(' | ')}`,
      );
      if ((await drainUntilQuiet(postgres.url, Date.now() + RECHECK_DRAIN_MS, log)) !== null)
        invariants = await check();
    }
    if (options.logDir) {
      mkdirSync(options.logDir, { recursive: true });
      for (const replica of replicas) {
        writeFileSync(
          path.join(options.logDir, `${replica.id.replace('#', '-')}.log`),
          `${replica.tail.join('\n')}\n`,
        );
      }
      writeFileSync(path.join(options.logDir, 'postgres.log'), `${postgres.logTail.join('\n')}\n`);
    }
    return runReport({
      seed: options.seed,
      profile: profile.name,
      started,
      startupSeconds,
      faultSeconds,
      drainSeconds,
      faults,
      record,
      invariants,
      invariantsFailedBeforeRecheck: failedFirst,
      rpcFaultHits: rpcProxy.hits,
      webhookFailures: webhooks.failures,
      replicas,
    });
  } finally {
    for (const stop of stops.reverse()) await stop().catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  }
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

/** The sellers' API behind the gateway: answers every call. */
function startUpstream(): Promise<http.Server> {
  const server = http.createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{"ok":true}');
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}
