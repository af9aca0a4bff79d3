/** The report of one run: seed, faults by kind, operations by kind and outcome, invariants, recovery, drain. */
import type { FaultRecord } from './faults';
import type { InvariantResult } from './invariants';
import type { UnservedRefundSummary } from './invariants-unserved';
import type { LoadRecord } from './load';
import type { Replica } from './replicas';

export interface RunReport {
  seed: number;
  profile: string;
  startedAt: string;
  wallSeconds: number;
  startupSeconds: number;
  faultSeconds: number;
  drainSeconds: number | null;
  faults: Record<string, number>;
  faultLog: FaultRecord[];
  operations: LoadRecord['operations'];
  operationsTotal: number;
  /** Checkout sessions the load saw paid (paid, paid_late, overpaid), by matching mode (amount, deposit_address). */
  checkoutSessionsPaid: LoadRecord['checkoutPaidByMode'];
  /** HTTP requests that carried the operations (replays and duplicate refunds included). */
  requestsTotal: number;
  invariants: InvariantResult[];
  /**
   * Invariants that failed when read right after the drain and held once the system drained again (work that
   * started after the drain, such as a settlement period's payouts): what they said then.
   */
  invariantsFailedBeforeRecheck: string[];
  /** Paid calls the seller failed, as the load saw them (charged, not served), by channel and by failure. */
  failingCalls: {
    total: number;
    byChannel: Record<string, number>;
    byFailure: Record<string, number>;
    chargedTwice: number;
  };
  /** What the ledger refunded of the unserved calls, in how many batches, and how long the buyers waited. */
  unservedRefunds: UnservedRefundSummary;
  /** Per fault kind: ms from the fault's end until the next served payment. */
  recoveryMs: Record<string, { n: number; p50: number | null; p99: number | null }>;
  rpcFaultHits: Record<string, number>;
  webhookFailures: Record<string, number>;
  /** Replicas that exited by themselves during the run (restarted, as Kubernetes would), with their last lines. */
  crashes: Record<string, string[]>;
  /** The host's 1-minute load average (`uptime`) at the start, its highest while the run went on, and at the end. */
  hostLoad: HostLoad;
  passed: boolean;
}

export interface HostLoad {
  start: number;
  max: number;
  end: number;
}

/**
 * The run's report from what it recorded: faults by kind, operations by outcome, recovery per fault kind, and one
 * more invariant, that no replica exited by itself (only the injected kills); passed when the system drained,
 * every invariant held and payments were served.
 */
export function runReport(run: {
  seed: number;
  profile: string;
  started: number;
  startupSeconds: number;
  faultSeconds: number;
  drainSeconds: number | null;
  faults: FaultRecord[];
  record: LoadRecord;
  invariants: InvariantResult[];
  invariantsFailedBeforeRecheck: string[];
  unservedRefunds: UnservedRefundSummary;
  rpcFaultHits: Record<string, number>;
  webhookFailures: Record<string, number>;
  replicas: Replica[];
  hostLoad: HostLoad;
}): RunReport {
  const { record, replicas, faults } = run;
  const crashed = replicas.flatMap((r) =>
    r.crashes.map(
      (c) =>
        `${r.id} exited by itself (${c.signal ?? c.code}): ${c.tail.slice(-4).join(' | ').slice(0, 400)}`,
    ),
  );
  const invariants = [
    ...run.invariants,
    {
      name: 'no replica crashed by itself (only injected kills)',
      checked: replicas.length,
      violations: crashed.length,
      examples: crashed.slice(0, 5),
    },
  ];
  const faultCounts: Record<string, number> = {};
  for (const fault of faults) faultCounts[fault.kind] = (faultCounts[fault.kind] ?? 0) + 1;
  const operationsTotal = Object.values(record.operations).reduce(
    (sum, outcomes) => sum + Object.values(outcomes).reduce((a, b) => a + b, 0),
    0,
  );
  return {
    seed: run.seed,
    profile: run.profile,
    startedAt: new Date(run.started).toISOString(),
    wallSeconds: Math.round((Date.now() - run.started) / 1000),
    startupSeconds: run.startupSeconds,
    faultSeconds: run.faultSeconds,
    drainSeconds: run.drainSeconds,
    faults: faultCounts,
    faultLog: faults,
    operations: record.operations,
    operationsTotal,
    checkoutSessionsPaid: { ...record.checkoutPaidByMode },
    requestsTotal: record.requests,
    invariants,
    invariantsFailedBeforeRecheck: run.invariantsFailedBeforeRecheck,
    failingCalls: failingCallCounts(record),
    unservedRefunds: run.unservedRefunds,
    recoveryMs: recoveryTimes(faults, record.successTimes),
    rpcFaultHits: run.rpcFaultHits,
    webhookFailures: run.webhookFailures,
    crashes: Object.fromEntries(
      replicas
        .filter((r) => r.crashes.length > 0)
        .map((r) => [
          r.id,
          r.crashes.map((c) => `${c.signal ?? c.code}: ${c.tail.slice(-3).join(' | ').slice(0, 600)}`),
        ]),
    ),
    hostLoad: run.hostLoad,
    passed:
      run.drainSeconds !== null &&
      invariants.every((i) => i.violations === 0) &&
      (record.operations.payment?.served ?? 0) > 0,
  };
}

function failingCallCounts(record: LoadRecord): RunReport['failingCalls'] {
  const tally = (key: (call: LoadRecord['failing'][number]) => string) => {
    const counts: Record<string, number> = {};
    for (const call of record.failing) counts[key(call)] = (counts[key(call)] ?? 0) + 1;
    return counts;
  };
  return {
    total: record.failing.length,
    byChannel: tally((c) => c.channel),
    byFailure: tally((c) => c.failure),
    chargedTwice: record.failing.filter((c) => c.secondTxHash).length,
  };
}

export function recoveryTimes(faults: FaultRecord[], successTimes: number[]): RunReport['recoveryMs'] {
  const sorted = [...successTimes].sort((a, b) => a - b);
  const byKind: Record<string, number[]> = {};
  for (const fault of faults) {
    const next = sorted.find((t) => t >= fault.endedAt);
    if (next === undefined) continue;
    byKind[fault.kind] ??= [];
    byKind[fault.kind]!.push(next - fault.endedAt);
  }
  const quantile = (values: number[], q: number) => {
    if (values.length === 0) return null;
    const s = [...values].sort((a, b) => a - b);
    return s[Math.min(s.length - 1, Math.ceil(q * s.length) - 1)]!;
  };
  return Object.fromEntries(
    Object.entries(byKind).map(([kind, values]) => [
      kind,
      { n: values.length, p50: quantile(values, 0.5), p99: quantile(values, 0.99) },
    ]),
  );
}

export function renderReport(report: RunReport): string {
  const lines: string[] = [];
  lines.push(
    `== chaos run, seed ${report.seed} (${report.profile}) — ${report.passed ? 'PASSED' : 'FAILED'}`,
  );
  lines.push(
    `wall ${report.wallSeconds} s (start-up ${report.startupSeconds} s, faults ${report.faultSeconds} s, drain ${report.drainSeconds ?? 'not drained'} s)`,
  );
  const load = report.hostLoad;
  lines.push(
    `host load average (1 min): ${load.start} at the start, ${load.max} at most, ${load.end} at the end`,
  );
  lines.push(
    `faults: ${
      Object.entries(report.faults)
        .map(([k, n]) => `${k} ${n}`)
        .join(', ') || 'none'
    }`,
  );
  lines.push(
    `rpc proxy hits: ${
      Object.entries(report.rpcFaultHits)
        .filter(([, n]) => n > 0)
        .map(([k, n]) => `${k} ${n}`)
        .join(', ') || 'none'
    }`,
  );
  lines.push(
    `webhook failures: ${Object.entries(report.webhookFailures)
      .map(([k, n]) => `${k} ${n}`)
      .join(', ')}`,
  );
  lines.push(`operations (${report.operationsTotal}, in ${report.requestsTotal} requests):`);
  for (const [kind, outcomes] of Object.entries(report.operations)) {
    lines.push(
      `  ${kind}: ${Object.entries(outcomes)
        .map(([o, n]) => `${o} ${n}`)
        .join(', ')}`,
    );
  }
  lines.push(
    `checkout sessions paid: ${report.checkoutSessionsPaid.amount} by amount, ${report.checkoutSessionsPaid.deposit_address} by deposit address`,
  );
  const failing = report.failingCalls;
  const refunds = report.unservedRefunds;
  const counts = (counts: Record<string, number>) =>
    Object.entries(counts)
      .map(([k, n]) => `${k} ${n}`)
      .join(', ') || 'none';
  lines.push(
    `failing paid calls: ${failing.total} (${counts(failing.byChannel)}; ${counts(failing.byFailure)}), charged twice ${failing.chargedTwice}`,
  );
  lines.push(
    `unserved refunds: ${refunds.refundedCalls} calls in ${refunds.batches} batch transfers (calls per batch: ${counts(refunds.callsPerBatch)}), first failure → refund on chain p50 ${refunds.waitMs.p50} ms, p99 ${refunds.waitMs.p99} ms, max ${refunds.waitMs.max} ms; not refunded: ${counts(refunds.notRefunded)}`,
  );
  lines.push(`replica crashes (not injected): ${Object.keys(report.crashes).length === 0 ? 'none' : ''}`);
  for (const [replica, crashes] of Object.entries(report.crashes)) {
    lines.push(`  ${replica}: ${crashes.length}`);
    for (const crash of crashes.slice(0, 3)) lines.push(`     ${crash}`);
  }
  lines.push('invariants:');
  for (const inv of report.invariants) {
    lines.push(
      `  ${inv.violations === 0 ? 'ok  ' : 'FAIL'} ${inv.name} (checked ${inv.checked}, violations ${inv.violations})`,
    );
    for (const example of inv.examples) lines.push(`         ${example}`);
  }
  if (report.invariantsFailedBeforeRecheck.length > 0) {
    lines.push('read again after a second drain; right after the first one these failed:');
    for (const failed of report.invariantsFailedBeforeRecheck) lines.push(`         ${failed}`);
  }
  lines.push('recovery (fault end → next served payment):');
  for (const [kind, r] of Object.entries(report.recoveryMs)) {
    lines.push(`  ${kind}: n ${r.n}, p50 ${r.p50} ms, p99 ${r.p99} ms`);
  }
  return lines.join('\n');
}
