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
  type NatsPasswords,
} from '@paygate/bus';
import { deployTestUsdc, startAnvil, testWallets } from '@paygate/testing';
import { buildServiceBundles } from '@paygate/testing/service-bundles';
import pg from 'pg';
import { Balancer } from './balancer';
import { FAULT_WEIGHTS, type FaultKind, type FaultRecord, runFaults } from './faults';
import { checkInvariants, pendingWork, SCHEMAS } from './invariants';
import { changePayoutAddress, emptyRecord, fundBuyers, rotateApiKey, runLoad, setUpSellers } from './load';
import { NatsCluster } from './nats-cluster';
import { ChaosPostgres } from './postgres';
import { Prng } from './prng';
import { createReplicas, type Replica } from './replicas';
import { type RunReport, recoveryTimes } from './report';
import { RpcFaultProxy } from './rpc-proxy';
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
const OPERATOR_TOKEN = 'chaos-operator-token-not-secret-000';
const SESSION_SECRET = 'chaos-session-secret-not-secret-0123456789';

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
    payoutUnclaimedAfterMs: 30_000,
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

/** Waits until nothing is in flight for 2 s (pendingWork), up to `deadline`: when it became quiet, or null. */
async function drainUntilQuiet(
  databaseUrl: string,
  deadline: number,
  log: (line: string) => void,
): Promise<number | null> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    let quietSince: number | undefined;
    let lastShown = 0;
    while (Date.now() < deadline) {
      const pending = await pendingWork(client).catch(() => ({ unreachable: 1 }));
      const busy = Object.entries(pending).filter(([, n]) => n > 0);
      if (busy.length === 0) {
        quietSince ??= Date.now();
        // Quiet for 2 s: events in flight between an outbox and an inbox have landed too.
        if (Date.now() - quietSince > 2000) return quietSince;
      } else {
        quietSince = undefined;
        if (Date.now() - lastShown > 5000) {
          lastShown = Date.now();
          log(`draining: ${busy.map(([what, n]) => `${what} ${n}`).join(', ')}`);
        }
      }
      await new Promise((r) => setTimeout(r, 500));
    }
    return null;
  } finally {
    await client.end().catch(() => undefined);
  }
}

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
    await anchorStreamStore(admin.jsm);
    await ensureStreams(admin, { replicas: 3 });
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
    const envFor = (service: string): NodeJS.ProcessEnv => ({
      DATABASE_URL: postgres.url,
      DB_SCHEMA: SCHEMAS[service],
      NATS_URL: nats.url,
      NATS_USER: service,
      NATS_PASSWORD: passwords[service as keyof NatsPasswords],
      EVENT_NAMESPACE: namespace,
      PUBLIC_BASE_URL: balancer.url,
      CHAIN_RPC_URL: rpcProxy.url,
      CHAIN_NETWORK: 'local',
      CHAIN_ID: String(anvil.chainId),
      USDC_ADDRESS: usdcAddress,
      ESCROW_ADDRESS: testWallets.escrow.address,
      CHECKOUT_ESCROW_ADDRESS: testWallets.checkoutEscrow.address,
      // More blocks than the deepest reorg drawn (3): within the system's stated assumption, a reorg never
      // undoes an accepted payment or a confirmed payout. CHAOS_CONFIRMATIONS=1 shows what a deeper one does.
      CONFIRMATIONS: process.env.CHAOS_CONFIRMATIONS ?? '4',
      OPERATOR_TOKEN,
      SESSION_SECRET,
      PAYOUT_ADDRESS_DELAY_MS: '0',
      LOG_LEVEL: process.env.CHAOS_LOG_LEVEL ?? 'warn',
      NODE_ENV: 'development',
      STARTUP_ATTEMPTS: '120',
      ...(service === 'settlement'
        ? {
            ESCROW_PRIVATE_KEY: testWallets.escrow.privateKey,
            CHECKOUT_ESCROW_PRIVATE_KEY: testWallets.checkoutEscrow.privateKey,
            RELAYER_PRIVATE_KEY: testWallets.relayer.privateKey,
            TREASURY_ADDRESS: testWallets.platform.address,
            SETTLEMENT_PERIOD_SECONDS: '60',
            SCHEDULER_INTERVAL_MS: '5000',
            TX_TIMEOUT_MS: '30000',
          }
        : {}),
      ...(service === 'escrow-ledger'
        ? {
            RELEASE_INTERVAL_MS: '1000',
            REFUND_REQUESTS_PER_MINUTE: '100000',
            // Receipts of payments booked before CONFIRMATIONS (x402) checked every second: a dropped one is
            // reversed within seconds of CONFIRMATIONS blocks, inside the drain.
            CHAIN_CHECK_INTERVAL_MS: '1000',
            // A reservation settlement never claimed (its answer lost in a Postgres fault) is cancelled within the
            // drain. Settlement claims its reservations within seconds when idle, but a full run under RPC faults
            // and replica kills claimed some 25–37 s after the reservation: at 30 s, payouts were refused
            // (`not_pending: cancelled`) that were on their way. The short profile's light load claims in seconds.
            PAYOUT_UNCLAIMED_AFTER_MS: String(profile.payoutUnclaimedAfterMs),
            PAYOUT_SWEEP_INTERVAL_MS: '2000',
          }
        : {}),
      ...(service === 'registry' ? { VALIDATION_INTERVAL_MS: '500' } : {}),
      // Every buyer of the load calls from 127.0.0.1, where real agents each have their own address: limits per
      // client address would answer most of the load 429 (683 of 1,918 operations in one run) instead of working.
      ...(service === 'gateway-proxy' ? { RATE_LIMIT_PER_MINUTE: '100000' } : {}),
      ...(service === 'checkout' ? { SESSION_RATE_LIMIT_PER_CLIENT: '100000' } : {}),
      ...(service === 'notifier'
        ? {
            // Short waits: a run drains within seconds of the last fault although half the deliveries fail.
            WEBHOOK_TIMEOUT_MS: '2000',
            WEBHOOK_RETRY_BASE_DELAY_MS: '500',
            WEBHOOK_RETRY_MAX_DELAY_MS: '2000',
            WEBHOOK_CLAIM_LEASE_MS: '6000',
            WEBHOOK_POLL_INTERVAL_MS: '500',
            // Half the deliveries fail, many by hanging until the timeout: more in flight so the backlog of a
            // 1,000-operation run drains within the bound (8 per replica drained about 8 a second).
            WEBHOOK_CONCURRENCY: '32',
            WEBHOOK_BATCH_SIZE: '64',
          }
        : {}),
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
    const accountChanges = (async () => {
      await new Promise((r) => setTimeout(r, (profile.faultSeconds * 1000) / 2));
      const rotated = sellers[0]!;
      const moved = sellers[1 % sellers.length]!;
      for (const [kind, change] of [
        ['keyRotation', () => rotateApiKey(balancer.url, rotated)],
        ['payoutAddressChange', () => changePayoutAddress(balancer.url, moved)],
      ] as const) {
        // Retried on a 5xx or no answer (a fault may be under way), as the seller would, bounded.
        let outcome = '';
        for (let attempt = 0; attempt < 6; attempt++) {
          outcome = await change().catch((error: Error) => `error: ${error.message.slice(0, 60)}`);
          if (!/ 5\d\d |^error/.test(outcome)) break;
          await new Promise((r) => setTimeout(r, 2000));
        }
        record.operations[kind] = { [outcome]: 1 };
        record.accountChanges.push(`${kind}: ${outcome}`);
        log(`${kind}: ${outcome}`);
      }
    })();
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
      latestEndsAt: faultStart + 2 * profile.faultSeconds * 1000,
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
    const crashed = replicas.flatMap((r) =>
      r.crashes.map(
        (c) =>
          `${r.id} exited by itself (${c.signal ?? c.code}): ${c.tail.slice(-4).join(' | ').slice(0, 400)}`,
      ),
    );
    invariants.push({
      name: 'no replica crashed by itself (only injected kills)',
      checked: replicas.length,
      violations: crashed.length,
      examples: crashed.slice(0, 5),
    });
    const faultCounts: Record<string, number> = {};
    for (const fault of faults) faultCounts[fault.kind] = (faultCounts[fault.kind] ?? 0) + 1;
    const operationsTotal = Object.values(record.operations).reduce(
      (sum, outcomes) => sum + Object.values(outcomes).reduce((a, b) => a + b, 0),
      0,
    );
    return {
      seed: options.seed,
      profile: profile.name,
      startedAt: new Date(started).toISOString(),
      wallSeconds: Math.round((Date.now() - started) / 1000),
      startupSeconds,
      faultSeconds,
      drainSeconds,
      faults: faultCounts,
      faultLog: faults,
      operations: record.operations,
      operationsTotal,
      requestsTotal: record.requests,
      invariants,
      invariantsFailedBeforeRecheck: failedFirst,
      recoveryMs: recoveryTimes(faults, record.successTimes),
      rpcFaultHits: rpcProxy.hits,
      webhookFailures: webhooks.failures,
      crashes: Object.fromEntries(
        replicas
          .filter((r) => r.crashes.length > 0)
          .map((r) => [
            r.id,
            r.crashes.map((c) => `${c.signal ?? c.code}: ${c.tail.slice(-3).join(' | ').slice(0, 600)}`),
          ]),
      ),
      passed:
        drainSeconds !== null &&
        invariants.every((i) => i.violations === 0) &&
        (record.operations.payment?.served ?? 0) > 0,
    };
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

function watchCrashes(replicas: Replica[], log: (line: string) => void): { stop(): void } {
  const seen = new Map<Replica, number>();
  const timer = setInterval(() => {
    for (const replica of replicas) {
      if (replica.crashes.length > (seen.get(replica) ?? 0)) {
        seen.set(replica, replica.crashes.length);
        const crash = replica.crashes.at(-1)!;
        log(
          `${replica.id} CRASHED (${crash.signal ?? crash.code}): ${crash.tail.slice(-3).join(' | ').slice(0, 800)}`,
        );
        if (!replica.isRunning()) replica.start();
      }
    }
  }, 1000);
  return { stop: () => clearInterval(timer) };
}

/** The sellers' API behind the gateway: answers every call. */
function startUpstream(): Promise<http.Server> {
  const server = http.createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{"ok":true}');
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}
