/**
 * The profiles a chaos run takes (`CHAOS_PROFILE`): how many replicas of each service, how long the faults go on,
 * how much load, and the drain's bound.
 */

import { ALL_SERVICES } from '../service-schemas';
import { FAULT_WEIGHTS, type FaultKind } from './faults';
import type { DrawnKind } from './load';

export interface ChaosProfile {
  name: string;
  /** Replicas of each service (chain-indexer's two elect a leader). */
  replicas: Record<string, number>;
  faultSeconds: number;
  operations: number;
  buyers: number;
  /** Agents beside the buyers that only pay calls their seller fails (load.ts failingAgent). */
  failingAgents: number;
  sellers: number;
  pauseMs: number;
  drainTimeoutSeconds: number;
  /** The load goes on this long past the last fault (bounded), so recovery after it is measured too. */
  loadTailSeconds: number;
  /** Faults injected at least, the fault phase going on past faultSeconds (at most twice as long) until then. */
  minFaults?: number;
  faultWeights?: Partial<Record<FaultKind, number>>;
  /** Changes to the load's operation weights (load.ts WEIGHTS). */
  operationWeights?: Partial<Record<DrawnKind, number>>;
  /**
   * How long the balancer waits for a replica's answer before it sends the request to the next replica (default
   * 8 s, how a frozen replica is told apart). A request resent after it reached a replica runs twice: a paid call
   * slower than this under load was settled by the first replica and refused as a used authorization by the second.
   */
  balancerTryTimeoutMs?: number;
  /**
   * Whether the services read the chain through the RPC fault proxy (default) or from anvil itself: a run without
   * faults (make load) spares every chain read a hop through the load process's event loop, as the reference
   * facilitator beside it reads anvil directly.
   */
  rpcThroughProxy?: boolean;
}

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
    // About one paid call in ten is one its seller fails (a failing call takes 2-10 s, a buyer's operation 3-5).
    failingAgents: 6,
    sellers: 4,
    pauseMs: 100,
    drainTimeoutSeconds: 120,
    loadTailSeconds: 20,
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
    // Its 40-odd operations pay checkout sessions of both sellers, one matching by amount and one by deposit
    // address: checkout twice as often as in the full profile (8 and 6 of 100).
    operationWeights: { checkoutTransfer: 16, checkoutWallet: 12 },
    // One agent paying failing calls: a handful per run, each refunded within the drain.
    failingAgents: 1,
    buyers: 3,
    sellers: 2,
    pauseMs: 100,
    drainTimeoutSeconds: 90,
    loadTailSeconds: 5,
  },
};

/**
 * `make load`'s system (deploy/load/main.ts): the full profile's replicas and bounds without its faults, the
 * given paying agents funded as its buyers, and no failing agents, since the load pays no call its seller fails.
 */
export function loadProfile(buyers: number): ChaosProfile {
  // Nothing is frozen in a load run: a replica that is slow to answer is answering (a paid call waits for its block).
  return {
    ...PROFILES.full!,
    name: 'load',
    buyers,
    failingAgents: 0,
    sellers: 4,
    balancerTryTimeoutMs: 60_000,
    rpcThroughProxy: false,
  };
}

/**
 * The short profile with chain reorganisations as the only fault (depth 1–3, half of them dropping their
 * transactions): `CHAOS_PROFILE=reorgs` checks the reorg handling (payments booked before CONFIRMATIONS,
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
