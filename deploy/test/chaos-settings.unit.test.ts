/**
 * The production settings the chaos runs argue for (docs/reliability.md): the k8s NATS values pin a nats-server
 * without the known JetStream data-loss bugs (2.12.3 or newer) and fsync every write; the services create their
 * streams with 3 replicas and bound every Postgres wait.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parse, parseAllDocuments } from 'yaml';
import { FAULT_WEIGHTS, type FaultRecord, type FaultTargets, runFaults } from '../chaos/faults';
import { Prng } from '../chaos/prng';
import { loadProfile, PROFILES } from '../chaos/profiles';

const ROOT = path.join(__dirname, '../..');
type Obj = Record<string, any>;

function atLeast(version: string, minimum: [number, number, number]): boolean {
  const parts = /^(\d+)\.(\d+)\.(\d+)/.exec(version)?.slice(1).map(Number);
  if (!parts) return false;
  for (let i = 0; i < 3; i++) if (parts[i] !== minimum[i]) return parts[i]! > minimum[i]!;
  return true;
}

describe('production reliability settings', () => {
  const values = parse(readFileSync(path.join(ROOT, 'k8s/infra/nats-values.yaml'), 'utf8')) as Obj;

  it('pins nats-server 2.12.3 or newer, and fsyncs every JetStream write', () => {
    expect(values.container.image.repository).toBe('nats');
    expect(atLeast(values.container.image.tag, [2, 12, 3])).toBe(true);
    expect(values.config.jetstream.merge.sync_interval).toBe('always');
    expect(values.config.cluster).toMatchObject({ enabled: true, replicas: 3 });
  });

  it('the services create 3-replica streams and bound every Postgres wait', () => {
    const docs = parseAllDocuments(readFileSync(path.join(ROOT, 'k8s/base/config-common.yaml'), 'utf8'));
    const common = docs.map((d) => d.toJS() as Obj).find((o) => o?.metadata?.name === 'paygate-common')!;
    expect(common.data).toMatchObject({
      NATS_STREAM_REPLICAS: '3',
      DB_POOL_SIZE: expect.stringMatching(/^\d+$/),
      DB_STATEMENT_TIMEOUT_MS: expect.stringMatching(/^[1-9]\d*$/),
      DB_LOCK_TIMEOUT_MS: expect.stringMatching(/^[1-9]\d*$/),
      DB_IDLE_IN_TRANSACTION_TIMEOUT_MS: expect.stringMatching(/^[1-9]\d*$/),
    });
    expect(atLeast('2.9.20', [2, 12, 3])).toBe(false);
    expect(atLeast('2.12.10', [2, 12, 3])).toBe(true);
  });
});

describe('the chaos fault schedule', () => {
  it('draws every fault kind, the send that times out although mined included', () => {
    const prng = new Prng(20261125);
    const drawn = new Set<string>();
    for (let i = 0; i < 2000; i++) drawn.add(prng.weighted(FAULT_WEIGHTS));
    expect([...drawn].sort()).toEqual(Object.keys(FAULT_WEIGHTS).sort());
    expect(FAULT_WEIGHTS.rpcSendTimeout).toBeGreaterThan(0);
  });

  it('goes on past its end until the run has its least number of faults (a slow machine)', async () => {
    const record: FaultRecord[] = [];
    // RPC faults only, against a proxy that records nothing: the schedule itself is what is checked.
    const rpcProxy = { inject: () => undefined, clear: () => undefined };
    // The schedule's holds and pauses are timers: run on a fake clock, the seconds they stand for pass at once.
    jest.useFakeTimers();
    const schedule = runFaults({
      prng: new Prng(7),
      targets: { rpcProxy } as unknown as FaultTargets,
      endsAt: Date.now(),
      minFaults: 2,
      latestEndsAt: Date.now() + 60_000,
      record,
      log: () => undefined,
      weights: Object.fromEntries(
        Object.keys(FAULT_WEIGHTS).map((kind) => [kind, kind === 'rpcFault' ? 1 : 0]),
      ),
    });
    try {
      await jest.runAllTimersAsync();
      await schedule;
    } finally {
      jest.useRealTimers();
    }
    expect(record.map((fault) => fault.kind)).toEqual(['rpcFault', 'rpcFault']);
  });
});

describe('make load on the chaos system', () => {
  it('funds only the agents the load pays with: no failing agents (startSystem funds buyers + failingAgents)', () => {
    const profile = loadProfile(60);
    expect(profile.buyers + profile.failingAgents).toBe(60);
    expect(profile.failingAgents).toBe(0);
    expect(profile.replicas).toEqual(PROFILES.full!.replicas);
  });
});
