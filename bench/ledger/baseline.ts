/**
 * The ledger's booking command beside the payment.confirmed consumer it replaced, measured alternately on the same
 * host so the figure is a ratio of one run: `tsx deploy/scripts/with-infra.ts tsx bench/ledger/baseline.ts`.
 * The old side is a git worktree of BASELINE_REVISION (default a7b09f5, the last escrow-ledger that booked payments
 * from payment.confirmed) at BASELINE_WORKTREE (default /tmp/ledger-old), created and installed (from pnpm's store
 * where it can) when missing; its own bench/ledger/run.ts publishes the payments to JetStream and waits until its consumer booked
 * them all. The new side is this checkout's run.ts. BASELINE_PAIRS pairs (default 4), the side going first
 * alternating (old/new, new/old, …: a second run can find Postgres warmer or the host busier). BENCH_EVENTS sizes
 * both. Writes bench/results/ledger.json (the last new run, with every pair) and the ledger section of
 * docs/benchmarks.md; exits 1 when a run was not exactly once.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { type LedgerPair, type LedgerResult, writeLedgerResult } from './report';

const ROOT = path.join(__dirname, '../..');
const REVISION = process.env.BASELINE_REVISION ?? 'a7b09f5';
const WORKTREE = process.env.BASELINE_WORKTREE ?? '/tmp/ledger-old';
const PAIRS = Number(process.env.BASELINE_PAIRS ?? 4);
const COMMAND = 'tsx deploy/scripts/with-infra.ts tsx bench/ledger/baseline.ts';

function sh(command: string, args: string[], cwd: string): void {
  const result = spawnSync(command, args, { cwd, stdio: 'inherit' });
  if (result.status !== 0) throw new Error(`${command} ${args.join(' ')} failed in ${cwd}`);
}

function ensureWorktree(): void {
  if (existsSync(path.join(WORKTREE, 'bench/ledger/run.ts'))) return;
  sh('git', ['worktree', 'add', '--detach', WORKTREE, REVISION], ROOT);
  sh('pnpm', ['install', '--prefer-offline', '--frozen-lockfile', '--reporter=silent'], WORKTREE);
}

/** One run of a tree's bench/ledger/run.ts in its own process; its result is the JSON it prints last. */
function runSide(side: 'old' | 'new'): LedgerResult {
  const cwd = side === 'old' ? WORKTREE : ROOT;
  const env: NodeJS.ProcessEnv = { ...process.env, BENCH_NO_WRITE: '1' };
  // The template database holds this checkout's migrations; the old tree migrates its own schema.
  if (side === 'old') delete env.PAYGATE_TEST_TEMPLATE_DATABASE;
  const result = spawnSync(process.execPath, ['--import', 'tsx', 'bench/ledger/run.ts'], {
    cwd,
    env,
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
    stdio: ['ignore', 'pipe', 'inherit'],
    timeout: 15 * 60_000,
  });
  const out = result.stdout ?? '';
  const start = out.lastIndexOf('{\n  "benchmark"');
  if (result.status !== 0 || start < 0) {
    process.stderr.write(out.slice(-4000));
    throw new Error(`the ${side} ledger bench failed (exit ${result.status ?? result.signal})`);
  }
  return JSON.parse(out.slice(start)) as LedgerResult;
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};

function main(): void {
  ensureWorktree();
  const pairs: LedgerPair[] = [];
  let last: LedgerResult | undefined;
  let oldBenchmark = '';
  for (let i = 0; i < PAIRS; i++) {
    const order: Array<'old' | 'new'> = i % 2 === 0 ? ['old', 'new'] : ['new', 'old'];
    const runs: Partial<Record<'old' | 'new', LedgerResult>> = {};
    for (const side of order) {
      process.stdout.write(`pair ${i + 1} ${side}: load ${os.loadavg()[0]!.toFixed(2)}\n`);
      runs[side] = runSide(side);
      process.stdout.write(`pair ${i + 1} ${side}: ${runs[side]!.eventsPerSecond} payments/s\n`);
    }
    const old = runs.old!;
    const fresh = runs.new!;
    oldBenchmark = old.benchmark;
    last = fresh;
    pairs.push({
      first: order[0]!,
      oldPerSecond: old.eventsPerSecond,
      newPerSecond: fresh.eventsPerSecond,
      ratio: Number((fresh.eventsPerSecond / old.eventsPerSecond).toFixed(3)),
      loadBefore: { old: old.loadAverage.before[0]!, new: fresh.loadAverage.before[0]! },
      oldExactlyOnce: old.exactlyOnce,
      newExactlyOnce: fresh.exactlyOnce,
    });
  }
  const ratios = pairs.map((pair) => pair.ratio);
  const result: LedgerResult = {
    ...last!,
    baseline: {
      oldRevision: REVISION,
      oldBenchmark,
      pairs,
      medianRatio: Number(median(ratios).toFixed(3)),
      minRatio: Math.min(...ratios),
      command: COMMAND,
    },
  };
  writeLedgerResult(result);
  process.stdout.write(`${JSON.stringify(result.baseline, null, 2)}\n`);
  if (pairs.some((pair) => !pair.oldExactlyOnce || !pair.newExactlyOnce)) process.exitCode = 1;
}

main();
