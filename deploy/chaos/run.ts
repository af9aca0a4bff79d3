/**
 * One chaos run: the whole system as real processes on loopback (3-node NATS cluster, the run's own Postgres,
 * anvil behind the RPC fault proxy, each service's replicas, a webhook receiver failing half its deliveries),
 * seeded load and faults for a while, then a drain and the invariants. Everything it starts, it stops.
 */
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { testWallets } from '@paygate/testing';
import pg from 'pg';
import { drainUntilQuiet } from './drain';
import { type FaultRecord, runFaults } from './faults';
import { checkInvariants } from './invariants';
import { type UnservedRefundSummary, unservedRefundSummary } from './invariants-unserved';
import { emptyRecord, type LoadRecord, runLoad } from './load';
import { changeAccountsMidway, type Seller } from './participants';
import { Prng } from './prng';
import type { ChaosProfile } from './profiles';
import { watchCrashes } from './replicas';
import { type HostLoad, type RunReport, runReport } from './report';
import { OPERATOR_TOKEN } from './service-env';
import { type ChaosRun, type ChaosSystem, type Participants, startSystem } from './system';

/** The second drain's bound, when an invariant failed right after the first (see readInvariants). */
const RECHECK_DRAIN_MS = 30_000;

/** What the load and the faults left: what the load was told, the faults injected, and when they ended. */
interface FaultPhase {
  record: LoadRecord;
  faults: FaultRecord[];
  faultSeconds: number;
  lastFaultAt: number;
}

/**
 * One run, as its phases: start the system, the load under the seed's faults, quiesce (drain), read the
 * invariants (again after a second drain if one failed), and the report. Everything started is stopped at the end.
 */
export async function runChaos(options: {
  seed: number;
  profile: ChaosProfile;
  log?: (line: string) => void;
  /** Where each replica's last 200 log lines are written at the end (for a failed run's post-mortem). */
  logDir?: string;
}): Promise<RunReport> {
  const run = newRun(options);
  const hostLoad = watchHostLoad();
  try {
    run.log(`seed ${run.seed}, profile ${run.profile.name}, dir ${run.dir}`);
    const { system, participants } = await startSystem(run);
    const phase = await loadUnderFaults(run, system, participants);
    const drainSeconds = await quiesce(run, system, phase.lastFaultAt);
    const { invariants, failedFirst } = await readInvariants(run, system, phase.record, drainSeconds);
    const unservedRefunds = await readUnservedRefunds(system.postgres.url);
    if (options.logDir) keepLogs(options.logDir, system);
    return runReport({
      seed: run.seed,
      profile: run.profile.name,
      started: run.started,
      startupSeconds: participants.startupSeconds,
      faultSeconds: phase.faultSeconds,
      drainSeconds,
      faults: phase.faults,
      record: phase.record,
      invariants,
      invariantsFailedBeforeRecheck: failedFirst,
      unservedRefunds,
      rpcFaultHits: system.rpcProxy.hits,
      webhookFailures: system.webhooks.failures,
      replicas: system.replicas,
      hostLoad: hostLoad.stop(),
    });
  } finally {
    hostLoad.stop();
    for (const stop of run.stops.reverse()) await stop().catch(() => undefined);
    if (!process.env.CHAOS_KEEP_DIR) rmSync(run.dir, { recursive: true, force: true });
  }
}

/** The host's 1-minute load average, sampled every 5 s: a run's figures depend on what else the cores carry. */
function watchHostLoad(): { stop: () => HostLoad } {
  const now = () => Math.round(os.loadavg()[0]! * 10) / 10;
  const start = now();
  let max = start;
  const timer = setInterval(() => {
    max = Math.max(max, now());
  }, 5000);
  timer.unref();
  return {
    stop: () => {
      clearInterval(timer);
      const end = now();
      max = Math.max(max, end);
      return { start, max, end };
    },
  };
}

function newRun(options: { seed: number; profile: ChaosProfile; log?: (line: string) => void }): ChaosRun {
  const prng = new Prng(options.seed);
  const started = Date.now();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'paygate-chaos-'));
  // Postgres runs as its own user when this runs as root: it must reach its directory inside.
  chmodSync(dir, 0o755);
  return {
    seed: options.seed,
    profile: options.profile,
    prng,
    loadPrng: prng.fork('load'),
    log: options.log ?? ((line: string) => console.log(`[chaos ${options.seed}] ${line}`)),
    started,
    dir,
    namespace: `chaos${options.seed.toString(36)}`,
    stops: [],
  };
}

/**
 * The load and the faults at once: the load runs while the fault schedule goes on, then everything a fault left
 * down comes back, and the load goes on a little past the last fault (bounded) before it is waited for.
 */
async function loadUnderFaults(
  run: ChaosRun,
  system: ChaosSystem,
  participants: Participants,
): Promise<FaultPhase> {
  const { profile, log } = run;
  // As Kubernetes would: a replica that crashed by itself is started again (and counted, in the report).
  const crashWatch = watchCrashes(system.replicas, log);
  const record = emptyRecord();
  const faultStart = Date.now();
  let faultsOverAt: number | undefined;
  const load = runLoad({
    baseUrl: system.balancer.url,
    usdcAddress: system.usdcAddress,
    escrowAddress: testWallets.escrow.address,
    checkoutEscrowAddress: testWallets.checkoutEscrow.address,
    operatorToken: OPERATOR_TOKEN,
    sellers: participants.sellers,
    buyers: participants.buyers,
    failingAgents: participants.failingAgents,
    prng: run.loadPrng,
    operations: profile.operations,
    pauseMs: profile.pauseMs,
    weights: profile.operationWeights,
    record,
    // The load goes on a little past the faults (bounded), so recovery after the last one is measured.
    shouldStop: () =>
      faultsOverAt !== undefined && Date.now() > faultsOverAt + profile.loadTailSeconds * 1000,
  });
  // Halfway through the faults: one seller rotates its API key, another moves its payout address.
  const accountChanges = changeAccountsMidway({
    baseUrl: system.balancer.url,
    sellers: participants.sellers,
    afterMs: (profile.faultSeconds * 1000) / 2,
    record,
    log,
  });
  const faults = await injectFaults(run, system, participants.sellers, faultStart);
  await restoreAfterFaults(system);
  crashWatch.stop();
  const lastFaultAt = Date.now();
  faultsOverAt = lastFaultAt;
  const faultSeconds = Math.round((lastFaultAt - faultStart) / 1000);
  log(`faults over after ${faultSeconds} s (${faults.length}); waiting for the load to finish`);
  await load;
  await accountChanges;
  return { record, faults, faultSeconds, lastFaultAt };
}

/** The seed's fault schedule, from `faultStart` for the profile's fault seconds (longer until its minimum ran). */
async function injectFaults(
  run: ChaosRun,
  system: ChaosSystem,
  sellers: Seller[],
  faultStart: number,
): Promise<FaultRecord[]> {
  const { profile } = run;
  const faults: FaultRecord[] = [];
  await runFaults({
    prng: run.prng.fork('faults'),
    targets: {
      replicas: system.replicas,
      nats: system.nats,
      eventsStream: system.admin.eventsStream,
      postgres: system.postgres,
      chain: system.anvil.provider,
      rpcProxy: system.rpcProxy,
      triggerSend: () => settleNowForEverySeller(system.balancer.url, sellers),
    },
    endsAt: faultStart + profile.faultSeconds * 1000,
    minFaults: profile.minFaults,
    // Four schedules' length at most: on a loaded 2-core machine one restart took 34.7 s and a Postgres crash 8.4 s,
    // so twice the 25 s ended a short run at three faults (a red clean-clone run of make test).
    latestEndsAt: faultStart + 4 * profile.faultSeconds * 1000,
    record: faults,
    log: run.log,
    weights: profile.faultWeights,
  });
  return faults;
}

/** The operator's settle-now for every seller at once: what rpcSendTimeout sends into its window. */
async function settleNowForEverySeller(baseUrl: string, sellers: Seller[]): Promise<string> {
  const answers = await Promise.all(
    sellers.map((seller) =>
      fetch(`${baseUrl}/api/v1/operator/settlements/run`, {
        method: 'POST',
        headers: { authorization: `Bearer ${OPERATOR_TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ sellerId: seller.sellerId }),
        signal: AbortSignal.timeout(10_000),
      }).then((r) => r.status),
    ),
  );
  return `settle-now of ${sellers.length} sellers: ${answers.join('/')}`;
}

/** Whatever a fault left down comes back: the RPC proxy clear, every replica running and thawed, every NATS node up. */
async function restoreAfterFaults(system: ChaosSystem): Promise<void> {
  system.rpcProxy.clear();
  for (const replica of system.replicas) {
    replica.thaw();
    if (!replica.isRunning()) replica.start();
  }
  for (const node of system.nats.nodes) if (!system.nats.isUp(node)) await system.nats.startNode(node);
}

/** Drain: nothing in flight, measured from the last fault (bounded); seconds it took, or null. */
async function quiesce(run: ChaosRun, system: ChaosSystem, lastFaultAt: number): Promise<number | null> {
  const quietAt = await drainUntilQuiet(
    system.postgres.url,
    lastFaultAt + run.profile.drainTimeoutSeconds * 1000,
    run.log,
  );
  const drainSeconds = quietAt === null ? null : Math.round((quietAt - lastFaultAt) / 1000);
  run.log(
    drainSeconds === null ? 'NOT drained within the bound' : `drained ${drainSeconds} s after the last fault`,
  );
  return drainSeconds;
}

/**
 * Every invariant, read after the drain. Work may start after the drain without anyone asking (the scheduler's
 * payouts of a settlement period that ended meanwhile): in flight while the invariants were read, it is not work
 * left behind. The system drains once more (bounded) and every invariant is read again; the first reading's
 * failures stay in the report.
 */
async function readInvariants(
  run: ChaosRun,
  system: ChaosSystem,
  record: LoadRecord,
  drainSeconds: number | null,
) {
  const check = () =>
    checkInvariants({
      databaseUrl: system.postgres.url,
      baseUrl: system.balancer.url,
      operatorToken: OPERATOR_TOKEN,
      chain: system.anvil.provider,
      usdcAddress: system.usdcAddress,
      escrowAddress: testWallets.escrow.address,
      checkoutEscrowAddress: testWallets.checkoutEscrow.address,
      record,
      webhooks: system.webhooks,
    });
  let invariants = await check();
  const failedFirst = invariants
    .filter((i) => i.violations > 0)
    .map((i) => `${i.name}: ${i.examples.join('; ')}`);
  if (failedFirst.length > 0 && drainSeconds !== null) {
    run.log(
      `an invariant failed right after the drain; draining again and reading them again: ${failedFirst.join(' | ')}`,
    );
    if ((await drainUntilQuiet(system.postgres.url, Date.now() + RECHECK_DRAIN_MS, run.log)) !== null)
      invariants = await check();
  }
  return { invariants, failedFirst };
}

/** The unserved calls' refunds as the ledger holds them after the drain (the report's figures). */
async function readUnservedRefunds(databaseUrl: string): Promise<UnservedRefundSummary> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    return await unservedRefundSummary(client);
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** Each replica's last log lines and Postgres' log, for a failed run's post-mortem. */
function keepLogs(logDir: string, system: ChaosSystem): void {
  mkdirSync(logDir, { recursive: true });
  for (const replica of system.replicas) {
    writeFileSync(path.join(logDir, `${replica.id.replace('#', '-')}.log`), `${replica.tail.join('\n')}\n`);
  }
  writeFileSync(path.join(logDir, 'postgres.log'), `${system.postgres.logTail.join('\n')}\n`);
}
