/**
 * The short chaos seed inside `make test`: the whole system as real processes (3-node NATS cluster with
 * 3-replica streams, the run's own Postgres, anvil behind the RPC fault proxy, the gateway and the chain-indexer
 * with two replicas each, the other services with one), about 45 s of seeded load and faults (kill -9 and
 * SIGSTOP of replicas, kill -9 of NATS nodes, Postgres connection kills and a crash, reorgs, RPC faults,
 * webhooks failing half the time), a drain, and every invariant of docs/reliability.md. The seed is printed;
 * `CHAOS_SEED=<n>` reruns it. The full runs are `make chaos`.
 *
 *   npx jest deploy/test/chaos-short
 */
import { renderReport } from '../chaos/report';
import { PROFILES, runChaos } from '../chaos/run';

const SEED = Number(process.env.CHAOS_SEED ?? 20261125);

describe('a short chaos seed', () => {
  it(`loses, duplicates and strands no micro-USDC (seed ${SEED})`, async () => {
    const lines: string[] = [];
    const report = await runChaos({
      seed: SEED,
      profile: PROFILES.short!,
      log: (line) => lines.push(`${new Date().toISOString()} ${line}`),
    });
    const text = renderReport(report);
    console.log(`${text}\n\nrun log:\n${lines.join('\n')}`);
    expect(report.faultLog.length).toBeGreaterThan(3);
    expect(report.operationsTotal).toBeGreaterThan(20);
    expect(report.drainSeconds).not.toBeNull();
    expect(report.invariants.filter((i) => i.violations > 0)).toEqual([]);
  }, 600_000);
});
