/**
 * `make load`: the whole system as real processes on loopback (deploy/chaos/system.ts without the faults: its own
 * Postgres, a 3-node NATS cluster with 3-replica streams, anvil with 1 s blocks, 2 replicas of each service behind
 * the balancer), a mix of agents for LOAD_SECONDS (default 300), and the reference x402 facilitator beside it
 * under the same offered load for the x402 part (deploy/load/agents.ts). Then a drain and the chaos run's money
 * invariants. Prints the table and writes bench/results/load-<date>.json.
 *
 *   LOAD_SECONDS          the load's length (default 300); the run as a whole is bounded at LOAD_SECONDS + 420 s
 *   LOAD_X402_AGENTS      x402 payers with the unmodified @x402/fetch (default 48), and as many reference payers
 *   LOAD_REFERENCE_AGENTS the reference facilitator's payers (default: as many as LOAD_X402_AGENTS; 0 measures Paygate alone)
 *   LOAD_PROOF_AGENTS     tx-hash proof payers (default 6)
 *   LOAD_MCP_AGENTS       MCP tool callers (default 4)
 *   LOAD_SUBSCRIBERS      subscribers repeating calls on a subscription (default 4)
 *   LOAD_CHECKOUT_AGENTS  checkout sessions paid by transfer (default 2)
 *   LOAD_OPERATOR_AGENTS  refunds and settle-nows, each (default 1)
 *   LOAD_RELAYER_KEYS     the relayer's pool of keys (RELAYER_PRIVATE_KEYS; default 4)
 *   LOAD_SEED             the draws (sellers, amounts, refunds); random by default
 *
 * Paygate's x402 payers run in a process of their own (deploy/load/x402-process.ts), as the reference's payers do
 * (deploy/load/reference-process.ts): the load process's event loop carries the balancer and the RPC proxy.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { createActiveSkill, testWallets } from '@paygate/testing';
import { JsonRpcProvider, toQuantity, Wallet } from 'ethers';
import pg from 'pg';
import { percentile } from '../../bench/report';
import { drainUntilQuiet } from '../chaos/drain';
import { checkInvariants } from '../chaos/invariants';
import { emptyRecord, type LoadOptions } from '../chaos/load';
import { fundBuyers } from '../chaos/participants';
import { newSeed, Prng } from '../chaos/prng';
import { loadProfile } from '../chaos/profiles';
import { OPERATOR_TOKEN } from '../chaos/service-env';
import { type ChaosRun, startSystem } from '../chaos/system';
import {
  AGENT_KINDS,
  type AgentKind,
  emptyAgentRecords,
  type KindRecord,
  payingAgents,
  runAgents,
} from './agents';
import { measureCpu } from './cpu';
import { measurePostgresWork } from './postgres-work';
import type { ReferenceSetup } from './reference-process';
import type { StartLine } from './side-io';
import type { X402Setup, X402SideRecord } from './x402-process';

const LOAD_SECONDS = Number(process.env.LOAD_SECONDS ?? 300);
/** Start-up (about 60-90 s here), the drain (at most 120 s) and the invariants, past the load. */
const RUN_BOUND_MS = (LOAD_SECONDS + 420) * 1000;
const DRAIN_BOUND_MS = 120_000;
const BLOCK_MS = 1000;
/** The relayer's keys: each its own nonce sequence, lock and balance watch (services/settlement/src/relayer/pool.ts). */
const RELAYER_KEYS = Number(process.env.LOAD_RELAYER_KEYS ?? 4);

const counts: Record<AgentKind, number> = {
  x402: Number(process.env.LOAD_X402_AGENTS ?? 48),
  reference: Number(process.env.LOAD_REFERENCE_AGENTS ?? process.env.LOAD_X402_AGENTS ?? 48),
  txHashProof: Number(process.env.LOAD_PROOF_AGENTS ?? 6),
  mcp: Number(process.env.LOAD_MCP_AGENTS ?? 4),
  subscriber: Number(process.env.LOAD_SUBSCRIBERS ?? 4),
  checkout: Number(process.env.LOAD_CHECKOUT_AGENTS ?? 2),
  refund: Number(process.env.LOAD_OPERATOR_AGENTS ?? 1),
  settleNow: Number(process.env.LOAD_OPERATOR_AGENTS ?? 1),
};

const log = (line: string) => console.log(`[load] ${line}`);

function stats(values: number[], seconds: number) {
  const sorted = [...values].sort((a, b) => a - b);
  const round = (v: number) => Math.round(v);
  return {
    done: sorted.length,
    perSecond: Math.round((sorted.length / seconds) * 100) / 100,
    p50Ms: round(percentile(sorted, 50)),
    p99Ms: round(percentile(sorted, 99)),
    maxMs: round(sorted.at(-1) ?? Number.NaN),
  };
}

async function main(): Promise<void> {
  if (!Number.isFinite(LOAD_SECONDS) || LOAD_SECONDS < 10)
    throw new Error('LOAD_SECONDS must be at least 10');
  // No reorgs here: one confirmation, as a Base deployment that trusts its sequencer's blocks.
  process.env.CHAOS_CONFIRMATIONS ??= '1';
  const seed = Number(process.env.LOAD_SEED ?? newSeed());
  const dir = mkdtempSync(path.join(os.tmpdir(), 'paygate-load-'));
  chmodSync(dir, 0o755); // Postgres runs as its own user when this runs as root
  const prng = new Prng(seed);
  if (!Number.isInteger(RELAYER_KEYS) || RELAYER_KEYS < 1 || RELAYER_KEYS > 64)
    throw new Error('LOAD_RELAYER_KEYS must be a whole number from 1 to 64');
  // The test relayer's key first (the pool's first key is the one RELAYER_PRIVATE_KEY names), then fresh ones given
  // ETH once the chain is up. Every replica inherits this process's environment.
  const extraRelayerKeys = Array.from({ length: RELAYER_KEYS - 1 }, () => Wallet.createRandom());
  // A paid call waits for its block as long as the payers' own deadline allows (40 s, as the reference's settle is
  // given), not the gateway's default 15 s: on this shared host the reference's own settles took a p50 of 17.5 s
  // in a 60 s run, and a gateway that stops waiting at 15 s + RELAYER_TIMEOUT_MS answers 503 for a payment its
  // relayer then settles (the recovery pass books it retryable, and the call is refunded unserved).
  process.env.X402_INCLUSION_WAIT_MS ??= '35000';
  process.env.RELAYER_PRIVATE_KEYS = [
    testWallets.relayer.privateKey,
    ...extraRelayerKeys.map((k) => k.privateKey),
  ].join(',');
  const run: ChaosRun = {
    seed,
    // The reference facilitator's payers are funded apart (deploy/load/agents.ts takes them in order).
    profile: loadProfile(payingAgents(counts) - counts.reference),
    prng,
    loadPrng: prng.fork('load'),
    log,
    started: Date.now(),
    dir,
    namespace: `load${seed.toString(36)}`,
    stops: [],
  };
  const stopAll = async () => {
    for (const stop of run.stops.reverse()) await stop().catch(() => undefined);
    run.stops = [];
    rmSync(dir, { recursive: true, force: true });
  };
  const watchdog = setTimeout(() => {
    log(`the run passed its bound (${RUN_BOUND_MS / 1000} s): stopping everything`);
    void stopAll().finally(() => process.exit(3));
  }, RUN_BOUND_MS);
  watchdog.unref();
  try {
    const report = await loadRun(run, extraRelayerKeys);
    const file = path.join(
      __dirname,
      `../../bench/results/load-${new Date().toISOString().slice(0, 10)}.json`,
    );
    writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
    printReport(report);
    log(`written to ${path.relative(process.cwd(), file)}`);
    process.exitCode = report.passed ? 0 : 1;
  } finally {
    await stopAll();
    clearTimeout(watchdog);
  }
}

async function loadRun(run: ChaosRun, extraRelayerKeys: ReadonlyArray<{ address: string }>) {
  const { system, participants } = await startSystem(run);
  const chainId = system.anvil.chainId;
  for (const key of extraRelayerKeys) {
    await system.anvil.provider.send('anvil_setBalance', [key.address, toQuantity(10n ** 20n)]);
  }
  // The reference facilitator's gas key: a wallet of its own, so it never shares a nonce with Paygate's relayer.
  const referenceKey = Wallet.createRandom();
  await system.anvil.provider.send('anvil_setBalance', [referenceKey.address, '0x56BC75E2D63100000']);
  // The buyers startSystem funded, through a provider of this process; the reference's payers get their own.
  const provider = new JsonRpcProvider(system.anvil.rpcUrl, chainId, {
    staticNetwork: true,
    pollingInterval: 100,
  });
  run.stops.push(async () => provider.destroy());
  const referencePayers = await fundBuyers(system.anvil.rpcUrl, system.usdcAddress, counts.reference);
  const paygateBuyers = participants.buyers;
  const wallets = paygateBuyers.map((w) => new Wallet(w.privateKey, provider));

  // A subscription skill of the first seller, for the subscribers: 30 days, available at once, on the upstream.
  const subscriptionSeller = participants.sellers[0]!;
  const subscriptionSkill = `load-subscription-${subscriptionSeller.sellerId.slice(-6).toLowerCase()}`;
  await createActiveSkill(
    system.balancer.url,
    subscriptionSeller.apiKey,
    {
      name: subscriptionSkill,
      type: 'Subscription',
      durationDays: 30,
      holdPeriodHours: 0,
      apiBaseUrl: `http://127.0.0.1:${(system.upstream.address() as AddressInfo).port}`,
      endpoints: [{ path: '/feed', method: 'GET', priceUsdc: '0.05', description: 'feed' }],
    } as Parameters<typeof createActiveSkill>[2],
    { timeoutMs: 60_000 },
  );

  const record = emptyRecord();
  const agents = emptyAgentRecords();
  let x402PhasesMs: Array<[string, number[]]> = [];
  // Set once every side process is ready (their start-up on a busy host is not load time).
  let loadEndsAt = Number.POSITIVE_INFINITY;
  const shouldStop = () => Date.now() >= loadEndsAt;
  const load: LoadOptions = {
    baseUrl: system.balancer.url,
    usdcAddress: system.usdcAddress,
    escrowAddress: testWallets.escrow.address,
    checkoutEscrowAddress: testWallets.checkoutEscrow.address,
    operatorToken: OPERATOR_TOKEN,
    sellers: participants.sellers,
    buyers: wallets,
    prng: run.loadPrng,
    operations: Number.MAX_SAFE_INTEGER,
    pauseMs: 0,
    record,
    shouldStop,
  };
  const reference = await startSideProcess<ReferenceSetup, KindRecord>('reference-process.ts', {
    rpcUrl: system.anvil.rpcUrl,
    chainId,
    usdcAddress: system.usdcAddress,
    gasKey: referenceKey.privateKey,
    payTo: participants.sellers[0]!.wallet.address,
    payerKeys: referencePayers.map((w) => w.privateKey),
    // Paygate relayer's receipt poll, as bench/x402 sets it: both look for the block as often.
    receiptPollMs: 20,
  });
  run.stops.push(async () => {
    reference.child.kill('SIGKILL');
  });
  // Paygate's x402 payers: the first wallets (runAgents gives the other kinds the ones after them).
  const x402Side = await startSideProcess<X402Setup, X402SideRecord>('x402-process.ts', {
    gatewayUrls: system.replicas.filter((r) => r.service === 'gateway-proxy').map((r) => r.url),
    sellers: participants.sellers.map(({ sellerId, skill }) => ({ sellerId, skill })),
    payerKeys: paygateBuyers.slice(0, counts.x402).map((w) => w.privateKey),
  });
  run.stops.push(async () => {
    x402Side.child.kill('SIGKILL');
  });
  loadEndsAt = Date.now() + LOAD_SECONDS * 1000;
  for (const side of [reference, x402Side]) side.start({ endsAt: loadEndsAt });
  const postmaster = await postmasterPid(system.postgres.url);
  const postgresWork = await measurePostgresWork(system.postgres.url);
  const cpu = measureCpu(() => [
    ...system.replicas.map((r) => ({ name: r.id, pid: r.child?.pid })),
    ...system.nats.nodes.map((node, i) => ({ name: `nats-server #${i + 1}`, pid: node.child?.pid })),
    { name: 'postgres (all backends)', pid: postmaster, withChildren: true },
    { name: 'anvil', pid: system.anvil.process.pid },
    { name: 'load agents + balancer + RPC proxy (this process)', pid: process.pid },
    { name: 'Paygate x402 payers (own process)', pid: x402Side.child.pid },
    { name: 'reference facilitator + its payers (own process)', pid: reference.child.pid },
  ]);
  log(
    `load for ${LOAD_SECONDS} s: ${AGENT_KINDS.map((k) => `${counts[k]} ${k}`).join(', ')} (seed ${run.seed})`,
  );
  const progress = setInterval(() => {
    // The x402 and reference payers' counts come from their own processes at the end.
    const done = AGENT_KINDS.filter((k) => k !== 'x402' && k !== 'reference')
      .map((k) => `${k} ${agents[k].okMs.length}`)
      .join(', ');
    log(`${Math.round((loadEndsAt - Date.now()) / 1000)} s left; done: ${done}`);
  }, 30_000);
  const loadStarted = performance.now();
  try {
    await runAgents({
      load,
      record,
      agents,
      prng: run.loadPrng.fork('agents'),
      chainId,
      counts,
      subscriptionUrl: `${system.balancer.url}/api/v1/skills/${subscriptionSkill}/feed`,
      subscriptionSeller,
      wallets,
      shouldStop,
    });
    agents.reference = await reference.record;
    const x402Record = await x402Side.record;
    agents.x402 = x402Record.kind;
    for (const [txHash, entry] of x402Record.served) {
      const known = record.served.get(txHash);
      if (known) known.count += entry.count;
      else record.served.set(txHash, entry);
    }
    record.successTimes.push(...x402Record.successTimes);
    record.requests += x402Record.requests;
    x402PhasesMs = x402Record.phasesMs;
  } finally {
    clearInterval(progress);
  }
  // Each agent finishes the operation it had in flight: the rates are over the load's own length.
  const loadSeconds = (performance.now() - loadStarted) / 1000;
  const cpuByProcess = cpu.stop();
  const postgres = await postgresWork.stop();
  log(`load over after ${loadSeconds.toFixed(0)} s; draining`);
  const drainStarted = Date.now();
  const quietAt = await drainUntilQuiet(system.postgres.url, drainStarted + DRAIN_BOUND_MS, log);
  const invariants = await checkInvariants({
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
  const byKind = Object.fromEntries(
    AGENT_KINDS.map((kind) => [
      kind,
      { agents: counts[kind], ...stats(agents[kind].okMs, loadSeconds), outcomes: agents[kind].outcomes },
    ]),
  );
  const x402 = byKind.x402!;
  const referenceStats = byKind.reference!;
  const crashes = system.replicas.filter((r) => r.crashes.length > 0).map((r) => r.id);
  return {
    date: new Date().toISOString(),
    commit: gitCommit(),
    host: { cpus: os.cpus().length, model: os.cpus()[0]?.model ?? '', loadAverageAtEnd: os.loadavg() },
    seed: run.seed,
    loadSeconds: Math.round(loadSeconds),
    startupSeconds: participants.startupSeconds,
    blockMs: BLOCK_MS,
    replicas: Object.fromEntries(
      [...new Set(system.replicas.map((r) => r.service))].map((s) => [
        s,
        system.replicas.filter((r) => r.service === s).length,
      ]),
    ),
    nats: `cluster of ${system.nats.nodes.length} nats-server processes, streams with 3 replicas`,
    byKind,
    x402VsReference: {
      settlementsPerSecond: { paygate: x402.perSecond, reference: referenceStats.perSecond },
      p50Ms: { paygate: x402.p50Ms, reference: referenceStats.p50Ms },
      p99Ms: { paygate: x402.p99Ms, reference: referenceStats.p99Ms },
      // Paygate's figure is the whole paid call (402, then the paid request through the gateway to the seller's
      // answer); the reference's is a facilitator settle alone.
      goal: { settlementsPerSecond: 100, p99Ms: BLOCK_MS + 500 },
    },
    /** Where a served x402 call's time went (deploy/chaos/x402-payment.ts `phasesMs`). */
    x402PhasesMs: Object.fromEntries(
      x402PhasesMs.map(([phase, values]) => {
        const { p50Ms, p99Ms } = stats(values, loadSeconds);
        return [phase, { p50Ms, p99Ms }];
      }),
    ),
    cpuByProcess,
    /** Over the load: commits and rows written, also per paid call served (all kinds). */
    postgres: {
      ...postgres,
      paidCalls: x402.done + byKind.txHashProof!.done + byKind.mcp!.done,
    },
    drainedSeconds: quietAt === null ? null : Math.round((quietAt - drainStarted) / 1000),
    replicaCrashes: crashes,
    invariants,
    passed: invariants.every((i) => i.violations === 0) && quietAt !== null,
  };
}

/**
 * Starts a side process of the load (deploy/load/reference-process.ts: the reference facilitator and its payers;
 * deploy/load/x402-process.ts: Paygate's x402 payers), each with its own event loop, with its setup; `record`
 * resolves with its payers' record once the load is over. Waits until it is ready.
 */
async function startSideProcess<Setup, SideRecord>(
  file: string,
  setup: Setup,
): Promise<{ child: ChildProcess; record: Promise<SideRecord>; start(line: StartLine): void }> {
  const child = spawn(process.execPath, [...process.execArgv, path.join(__dirname, file)], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const lines: Array<(line: Record<string, unknown>) => void> = [];
  let buffered = '';
  const exited = new Promise<never>((_, reject) =>
    child.once('exit', (code) => reject(new Error(`${file} exited (${code})`))),
  );
  exited.catch(() => undefined);
  child.stdout!.on('data', (chunk: Buffer) => {
    buffered += chunk.toString('utf8');
    for (let end = buffered.indexOf('\n'); end >= 0; end = buffered.indexOf('\n')) {
      const line = buffered.slice(0, end).trim();
      buffered = buffered.slice(end + 1);
      if (!line.startsWith('{')) continue;
      lines.shift()?.(JSON.parse(line) as Record<string, unknown>);
    }
  });
  const nextLine = () =>
    Promise.race([new Promise<Record<string, unknown>>((resolve) => lines.push(resolve)), exited]);
  const ready = nextLine();
  const record = nextLine().then((line) => line.record as SideRecord);
  record.catch(() => undefined);
  child.stdin!.write(`${JSON.stringify(setup)}\n`);
  await ready;
  return { child, record, start: (line) => child.stdin!.end(`${JSON.stringify(line)}\n`) };
}

/** The run's Postgres postmaster: its CPU counts every backend that exited. */
async function postmasterPid(databaseUrl: string): Promise<number | undefined> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ pid: number }>('select pg_backend_pid() as pid');
    const stat = (await import('node:fs')).readFileSync(`/proc/${rows[0]!.pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    return undefined;
  } finally {
    await client.end().catch(() => undefined);
  }
}

function gitCommit(): string {
  try {
    return execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
  } catch {
    return 'unknown';
  }
}

function printReport(report: Awaited<ReturnType<typeof loadRun>>): void {
  console.log(`\nload run ${report.date} (${report.commit}), ${report.loadSeconds} s, seed ${report.seed}`);
  console.log('kind         agents   done   per s    p50 ms   p99 ms');
  for (const [kind, s] of Object.entries(report.byKind)) {
    console.log(
      `${kind.padEnd(12)} ${String(s.agents).padStart(6)} ${String(s.done).padStart(6)} ${s.perSecond.toFixed(2).padStart(7)} ${String(s.p50Ms).padStart(9)} ${String(s.p99Ms).padStart(8)}`,
    );
  }
  console.log('\nwhere a served x402 call spent its time (ms, p50 / p99):');
  for (const [phase, t] of Object.entries(report.x402PhasesMs))
    console.log(`  ${phase.padEnd(10)} ${t.p50Ms} / ${t.p99Ms}`);
  console.log('\nCPU by process (cores over the load):');
  for (const p of report.cpuByProcess) console.log(`  ${p.cores.toFixed(2)}  ${p.process}`);
  const { commits, paidCalls, rowsWrittenByTable } = report.postgres;
  const perCall = (n: number) => (paidCalls > 0 ? (n / paidCalls).toFixed(1) : '-');
  console.log(
    `\nPostgres over the load: ${commits} commits, ${perCall(commits)} per paid call; rows written per paid call:`,
  );
  for (const t of rowsWrittenByTable.slice(0, 15))
    console.log(`  ${perCall(t.rows).padStart(5)}  ${t.table}`);
  console.log('\ninvariants:');
  for (const i of report.invariants)
    console.log(
      `  ${i.violations === 0 ? 'ok  ' : 'FAIL'} ${i.name}${i.violations ? `: ${i.examples.join('; ')}` : ''}`,
    );
  console.log(report.passed ? '\nPASSED' : '\nFAILED');
}

main().catch((error) => {
  console.error(`[load] ${(error as Error).stack ?? error}`);
  process.exit(2);
});
