/**
 * The ledger bench's outputs: bench/results/ledger.json and the ledger section of docs/benchmarks.md, written by
 * run.ts (the command alone) and by baseline.ts (the command beside the payment.confirmed consumer it replaced,
 * in alternating pairs: the same host and load for both).
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

const ROOT = path.join(__dirname, '../..');

export interface LedgerResult {
  benchmark: string;
  events: number;
  redeliveries: number;
  deliveries: number;
  /** Until every answer came. */
  seconds: number;
  /** Until every event of those bookings was published by the relay. */
  publishedSeconds: number;
  inFlight: number;
  eventsPerSecond: number;
  targetPerSecond: number;
  meetsTarget: boolean;
  batchSize: number;
  concurrency: number;
  exactlyOnce: boolean;
  checks: Record<string, string | number>;
  loadAverage: { before: number[]; after: number[] };
  machine: { host: string; cpus: number; cpuModel: string; node: string };
  ranAt: string;
  /** Present when baseline.ts measured the old consumer and the command alternately. */
  baseline?: LedgerBaseline;
}

export interface LedgerPair {
  /** Which of the two ran first in this pair. */
  first: 'old' | 'new';
  oldPerSecond: number;
  newPerSecond: number;
  /** newPerSecond / oldPerSecond. */
  ratio: number;
  /** 1-minute load average before the old and before the new run. */
  loadBefore: { old: number; new: number };
  oldExactlyOnce: boolean;
  newExactlyOnce: boolean;
}

export interface LedgerBaseline {
  /** The revision whose escrow-ledger booked payments by consuming payment.confirmed. */
  oldRevision: string;
  oldBenchmark: string;
  pairs: LedgerPair[];
  medianRatio: number;
  minRatio: number;
  command: string;
}

export function writeLedgerResult(result: LedgerResult): void {
  mkdirSync(path.join(ROOT, 'bench/results'), { recursive: true });
  writeFileSync(path.join(ROOT, 'bench/results/ledger.json'), `${JSON.stringify(result, null, 2)}\n`);
  writeSection(result);
}

const thousands = (n: number) => n.toLocaleString('en-US');

function baselineLines(baseline: LedgerBaseline): string[] {
  return [
    '',
    `Beside the consumer it replaced (\`${baseline.command}\`): the old escrow-ledger (${baseline.oldRevision}) booking`,
    `the same number of payments from \`payment.confirmed\` consumed off JetStream (${baseline.oldBenchmark}; no claim,`,
    'no event published) and this command, run alternately on the same host, each in its own process and database:',
    '',
    '| pair | first | old consumer, payments/s | command, payments/s | command / old | load (1 min) before old / new | exactly once (old / new) |',
    '|---|---|---|---|---|---|---|',
    ...baseline.pairs.map(
      (pair, i) =>
        `| ${i + 1} | ${pair.first} | ${thousands(pair.oldPerSecond)} | ${thousands(pair.newPerSecond)} | **${pair.ratio.toFixed(2)}** | ${pair.loadBefore.old} / ${pair.loadBefore.new} | ${pair.oldExactlyOnce ? 'yes' : 'NO'} / ${pair.newExactlyOnce ? 'yes' : 'NO'} |`,
    ),
    '',
    `Median ratio ${baseline.medianRatio.toFixed(2)}, lowest ${baseline.minRatio.toFixed(2)}.`,
  ];
}

function writeSection(result: LedgerResult): void {
  const file = path.join(ROOT, 'docs/benchmarks.md');
  mkdirSync(path.dirname(file), { recursive: true });
  const section = [
    '<!-- ledger:start -->',
    '## Ledger: booking throughput (ledger.claim_transfer with its payment)',
    '',
    `\`npx tsx bench/ledger/run.ts\` (part of \`make bench\`) asks escrow-ledger over NATS to claim and book ${result.events}`,
    `payments (\`ledger.claim_transfer\` with its \`payment\`, as the gateway and checkout ask it; ${result.inFlight} requests in`,
    `flight), ${result.redeliveries} of them (10%) a second time as a retry would, and measures until every one was answered: each answer comes`,
    'after the commit of its transaction, which claimed the transfer, booked it (transfer into suspense, then the 95/5',
    "hold split) and wrote its payment.confirmed into the ledger's outbox, published meanwhile by the relay. The claims that arrive",
    `together are one statement, its own transaction (claim_and_book, sql/ledger.sql: no balance row stays locked across a round trip to the busy process): up to ${result.batchSize} per statement, ${result.concurrency} in flight (PAYMENT_BATCH_SIZE, PAYMENT_CONCURRENCY).`,
    '',
    '| payments | requests | seconds | payments/s | target | exactly once | load average (1 min) before / after |',
    '|---|---|---|---|---|---|---|',
    `| ${result.events} | ${result.deliveries} | ${result.seconds} | **${result.eventsPerSecond}** | ${result.targetPerSecond} | ${result.exactlyOnce ? 'yes' : 'NO'} | ${result.loadAverage.before[0]} / ${result.loadAverage.after[0]} |`,
    ...(result.baseline ? baselineLines(result.baseline) : []),
    '',
    'Concurrent transactions insert claims and transfers in (chain, hash, log) order and lock the shared balance rows',
    "FOR NO KEY UPDATE in account id order, so transactions in flight never deadlock; each entry's balance is checked once",
    'per INSERT statement. A transfer first seen with its payment (every one here) is booked set-based: inserted already',
    'claimed, the transactions and both journal entries in one statement each per batch.',
    '',
    `Exactly-once check afterwards: ${result.checks.transactions} transactions and ${result.checks.paymentEntries} payment entries for`,
    `${result.events} transfers, ${result.checks.paymentConfirmedEvents} payment.confirmed, seller holds ${result.checks.sellerHeld} USDC (expected ${result.checks.expectedSellerHeld}), escrow asset`,
    `${result.checks.escrowAsset} (expected ${result.checks.expectedEscrowAsset}), ${result.checks.conflicts} conflicts, ${result.checks.reconciliationDifferences} reconciliation differences.`,
    `Machine: ${result.machine.host}, ${result.machine.cpus} CPUs (${result.machine.cpuModel}), Node ${result.machine.node}, shared with other work (the load averages above: at a load far above the CPU count both sides get a small, changing share of the machine, so a pair's ratio says more than either figure); ${result.ranAt}.`,
    'Raw figures: `bench/results/ledger.json`.',
    '<!-- ledger:end -->',
  ].join('\n');
  let text = existsSync(file) ? readFileSync(file, 'utf8') : '# Benchmarks\n';
  const pattern = /<!-- ledger:start -->[\s\S]*?<!-- ledger:end -->/;
  text = pattern.test(text) ? text.replace(pattern, section) : `${text.trimEnd()}\n\n${section}\n`;
  writeFileSync(file, text);
}
