/**
 * The fault schedule: one fault at a time, drawn from the seeded PRNG with these weights, each applied, held for
 * its drawn duration, then undone, with a drawn pause before the next. At most one NATS node is down at a time
 * (one fault at a time), sometimes the events stream's leader.
 */
import type { JsonRpcProvider } from 'ethers';
import type { NatsCluster } from './nats-cluster';
import type { ChaosPostgres } from './postgres';
import type { Prng } from './prng';
import type { Replica } from './replicas';
import { RPC_FAULTS, type RpcFaultProxy } from './rpc-proxy';

export const FAULT_WEIGHTS = {
  killReplica: 18,
  freezeReplica: 14,
  killNatsNode: 10,
  pgTerminateBackends: 10,
  pgCrash: 5,
  pgTableLock: 4,
  pgConnectionsUsedUp: 3,
  reorg: 10,
  rpcFault: 15,
  // The send that reaches the chain while its answer never comes back, with a payout sent into it: the
  // settlement sender must find its transaction by hash (recorded before the broadcast), never send a second one.
  rpcSendTimeout: 6,
} as const;
export type FaultKind = keyof typeof FAULT_WEIGHTS;

export interface FaultRecord {
  kind: FaultKind;
  detail: string;
  startedAt: number;
  endedAt: number;
}

export interface FaultTargets {
  replicas: Replica[];
  nats: NatsCluster;
  eventsStream: string;
  postgres: ChaosPostgres;
  chain: JsonRpcProvider;
  rpcProxy: RpcFaultProxy;
  /** Makes the services send a transaction now (an operator's settle-now): what rpcSendTimeout needs to hit. */
  triggerSend: () => Promise<string>;
}

/** Tables on the money path, one of which a table-lock fault holds. */
const LOCKABLE_TABLES = [
  'ledger.transactions',
  'ledger.transfers',
  'ledger.postings',
  'settlement.outgoing_transfers',
  'settlement.settlements',
  'gateway.outbox',
  'indexer.outbox',
  'notifier.webhook_deliveries',
] as const;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function runFaults(options: {
  prng: Prng;
  targets: FaultTargets;
  /** When the schedule ends (ms since epoch): no fault starts after it, and no fault is held past it by more
   *  than its shortest hold (1 s), so a run's fault phase has a bounded length. */
  endsAt: number;
  /**
   * Faults the schedule injects at least: on a slow machine one fault can take most of the schedule (a replica's
   * restart took 28 s of a 35 s schedule), so the schedule goes on past `endsAt` until this many ran, up to
   * `latestEndsAt`.
   */
  minFaults?: number;
  latestEndsAt?: number;
  record: FaultRecord[];
  log: (line: string) => void;
  weights?: Partial<Record<FaultKind, number>>;
}): Promise<void> {
  const { prng, targets, record, log } = options;
  const weights = { ...FAULT_WEIGHTS, ...options.weights } as Record<FaultKind, number>;
  const minFaults = options.minFaults ?? 0;
  const latestEndsAt = Math.max(options.endsAt, options.latestEndsAt ?? options.endsAt);
  const goOn = () => Date.now() < options.endsAt || (record.length < minFaults && Date.now() < latestEndsAt);
  while (goOn()) {
    const kind = prng.weighted(weights);
    const startedAt = Date.now();
    // A drawn hold is kept (the draw sequence is the seed's), but cut at the schedule's end.
    const hold = (ms: number) => Math.min(ms, Math.max(1000, options.endsAt - Date.now()));
    let detail: string;
    try {
      detail = await INJECTORS[kind](prng, targets, hold);
    } catch (error) {
      detail = `failed to inject: ${(error as Error).message}`;
    }
    const endedAt = Date.now();
    record.push({ kind, detail, startedAt, endedAt });
    log(`fault ${kind}: ${detail} (${endedAt - startedAt} ms)`);
    const pause = prng.int(1000, 4000);
    if (Date.now() + pause >= options.endsAt && record.length >= minFaults) break;
    await sleep(pause);
  }
}

/** One fault, applied, held for its drawn (and cut) time, and undone: what it did, for the record. */
type Injector = (prng: Prng, t: FaultTargets, hold: (ms: number) => number) => Promise<string>;

const INJECTORS: Record<FaultKind, Injector> = {
  killReplica,
  freezeReplica,
  killNatsNode,
  pgTerminateBackends,
  pgCrash,
  pgTableLock,
  pgConnectionsUsedUp,
  reorg,
  rpcFault,
  rpcSendTimeout,
};

async function killReplica(prng: Prng, t: FaultTargets, hold: (ms: number) => number): Promise<string> {
  const replica = prng.pick(t.replicas.filter((r) => r.isRunning()));
  await replica.kill9();
  await sleep(hold(prng.int(500, 5000)));
  replica.start();
  await replica.waitReady(120_000).catch(() => undefined);
  return `kill -9 ${replica.id}, restarted`;
}

async function freezeReplica(prng: Prng, t: FaultTargets, hold: (ms: number) => number): Promise<string> {
  const replica = prng.pick(t.replicas.filter((r) => r.isRunning()));
  const ms = hold(prng.int(1000, 10_000));
  replica.freeze();
  await sleep(ms);
  replica.thaw();
  return `SIGSTOP ${replica.id} for ${ms} ms`;
}

async function killNatsNode(prng: Prng, t: FaultTargets, hold: (ms: number) => number): Promise<string> {
  const leader = prng.chance(0.5) ? await t.nats.streamLeader(t.eventsStream) : undefined;
  const node = leader ?? prng.pick(t.nats.nodes);
  const ms = hold(prng.int(2000, 10_000));
  await t.nats.kill(node);
  await sleep(ms);
  await t.nats.startNode(node);
  return `kill -9 nats ${node.name}${leader ? ' (stream leader)' : ''} for ${ms} ms, restarted`;
}

async function pgTerminateBackends(_prng: Prng, t: FaultTargets): Promise<string> {
  const n = await t.postgres.terminateBackends();
  return `pg_terminate_backend of ${n} connections`;
}

async function pgCrash(_prng: Prng, t: FaultTargets): Promise<string> {
  const startedAt = Date.now();
  await t.postgres.crash();
  return `kill -9 of Postgres and its backends, back after ${Date.now() - startedAt} ms`;
}

async function pgTableLock(prng: Prng, t: FaultTargets, hold: (ms: number) => number): Promise<string> {
  const table = prng.pick(LOCKABLE_TABLES);
  const ms = hold(prng.int(1000, 6000));
  await t.postgres.holdTableLock(table, ms);
  return `access exclusive lock on ${table} for ${ms} ms`;
}

async function pgConnectionsUsedUp(
  prng: Prng,
  t: FaultTargets,
  hold: (ms: number) => number,
): Promise<string> {
  const ms = hold(prng.int(2000, 6000));
  const n = await t.postgres.exhaustConnections(ms);
  return `${n} free connection slots taken for ${ms} ms`;
}

/** A reorg 1–3 blocks deep; half of them mine the replaced blocks' transactions again, half drop them. */
async function reorg(prng: Prng, t: FaultTargets): Promise<string> {
  const depth = prng.int(1, 3);
  const reinclude = prng.chance(0.5);
  const head = await t.chain.getBlockNumber();
  const replacements: Array<[string, number]> = [];
  if (reinclude) {
    for (let offset = 0; offset < depth; offset++) {
      const block = (await t.chain.send('eth_getBlockByNumber', [
        `0x${(head - offset).toString(16)}`,
        false,
      ])) as {
        transactions: string[];
      } | null;
      for (const hash of block?.transactions ?? []) {
        const raw = (await t.chain.send('eth_getRawTransactionByHash', [hash])) as string | null;
        if (raw) replacements.push([raw, depth - 1 - offset]);
      }
    }
  }
  await t.chain.send('anvil_reorg', [depth, replacements]);
  return `anvil_reorg depth ${depth} at ${head}, ${reinclude ? `${replacements.length} transactions re-included` : 'transactions dropped'}`;
}

async function rpcFault(prng: Prng, t: FaultTargets, hold: (ms: number) => number): Promise<string> {
  const fault = prng.pick(RPC_FAULTS);
  const ms = hold(prng.int(3000, 10_000));
  t.rpcProxy.inject(fault, ms);
  await sleep(ms);
  t.rpcProxy.clear();
  return `RPC ${fault} for ${ms} ms`;
}

async function rpcSendTimeout(prng: Prng, t: FaultTargets, hold: (ms: number) => number): Promise<string> {
  const ms = hold(prng.int(4000, 10_000));
  // Every send in the window: mined, its answer never delivered (the client times out).
  t.rpcProxy.inject('sendTimeout', ms, 1);
  const sent = await t.triggerSend().catch((error: Error) => `settle-now failed: ${error.message}`);
  await sleep(Math.max(0, ms - 500));
  t.rpcProxy.clear();
  return `RPC sends time out although mined, for ${ms} ms (${sent})`;
}
