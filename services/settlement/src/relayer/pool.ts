import type { ServiceContext } from '@paygate/runtime';
import type { SettlementDB } from '../db';
import type { RelayerChain } from './chain';
import { NonceAllocator } from './nonce-allocator';
import type { RecordedAuthorizations } from './recorded';
import { describe, type Refusal, type RelayerSettings, refusal } from './settings';

const BALANCE_CACHE_MS = 2000;
/**
 * How old a balance may be and still answer while a fresh read is under way: a submission or `relayer.status`
 * does not wait on a slow chain read (a gateway that hears nothing within its timeout stops offering x402) while a
 * reading this recent is known. A key never spends this much gas between two reads.
 */
const BALANCE_STALE_MS = 10_000;
/**
 * How old a balance may be and still answer when the read that should replace it fails (a chain RPC that times out
 * under load): a balance does not disappear because a node is slow, and a key that really ran dry has its broadcasts
 * refused by the node. Only a key with no reading this recent is reported unreadable (x402 is then not offered).
 */
const BALANCE_KEPT_ON_FAILURE_MS = 60_000;

/** A submission assigned to a key, until its caller is answered. */
export interface Assignment {
  readonly signer: RelayerSigner;
  /** When its transaction was recorded (undefined before): from then on it waits for this key's queue. */
  recordedAt: number | undefined;
  release(): void;
}

/**
 * One key of the relayer's pool: its own nonce sequence (its allocator and advisory lock), its own balance watch,
 * and what this process has handed it and not answered yet.
 */
export class RelayerSigner {
  /** Lowercase, as relayed_authorizations.relayer_address holds it. */
  readonly address: string;
  readonly allocator: NonceAllocator;
  private balance: { wei: bigint; at: number } | undefined;
  private balanceRead: Promise<bigint> | undefined;
  private readonly assigned = new Set<Assignment>();
  /**
   * Set by the background pass: when this key's oldest open transaction in the table was sent, if that is longer
   * ago than RELAYER_STUCK_AFTER_MS (also submissions other replicas made, or whose callers stopped waiting).
   */
  stuckSince: number | undefined;
  /**
   * The highest relayer nonce among the open rows the background pass saw with `stuckSince`: once the chain has
   * mined it (and so every lower one), the mark is cleared at once rather than at the next pass.
   */
  openThroughNonce: bigint | undefined;

  constructor(
    ctx: ServiceContext<SettlementDB>,
    readonly chain: RelayerChain,
    private readonly settings: RelayerSettings,
    recorded: RecordedAuthorizations,
  ) {
    this.address = chain.address.toLowerCase();
    this.allocator = new NonceAllocator(ctx, chain, settings, recorded);
  }

  /** The background pass's look at this key's open rows: since when the oldest waits, and the highest nonce. */
  markOpen(oldestOpenAt: number | undefined, highestOpenNonce: bigint | undefined): void {
    this.stuckSince = oldestOpenAt;
    this.openThroughNonce = oldestOpenAt === undefined ? undefined : highestOpenNonce;
  }

  /**
   * The chain mined this key's nonces below `minedNonce` (a receipt of nonce n: n + 1): the pass's mark is cleared
   * when every open row it saw is among them. True when that cleared a stuck mark.
   */
  minedBelow(minedNonce: bigint, now: number): boolean {
    if (this.openThroughNonce === undefined || minedNonce <= this.openThroughNonce) return false;
    const wasStuck = this.stuck(now);
    this.stuckSince = undefined;
    this.openThroughNonce = undefined;
    return wasStuck && !this.stuck(now);
  }

  /** Whether the background pass's mark (not this process's own waiting submissions) says stuck. */
  markedStuck(now: number): boolean {
    return this.stuckSince !== undefined && now - this.stuckSince >= this.settings.stuckAfterMs;
  }

  /** Submissions of this process assigned to this key and not answered yet. */
  load(): number {
    return this.assigned.size;
  }

  /**
   * How long this key's oldest transaction still waiting for its receipt has waited (0 when none waits): the
   * background pass's view of the table, or a submission of this process recorded and not answered yet.
   */
  waitingMs(now: number): number {
    let oldest = this.stuckSince;
    for (const assignment of this.assigned) {
      if (assignment.recordedAt !== undefined)
        oldest = Math.min(oldest ?? assignment.recordedAt, assignment.recordedAt);
    }
    return oldest === undefined ? 0 : Math.max(0, now - oldest);
  }

  /** Whether a transaction of this key has waited longer than RELAYER_STUCK_AFTER_MS for its receipt. */
  stuck(now: number): boolean {
    const waiting = this.waitingMs(now);
    return waiting > 0 && waiting >= this.settings.stuckAfterMs;
  }

  assign(): Assignment {
    const assignment: Assignment = {
      signer: this,
      recordedAt: undefined,
      release: () => this.assigned.delete(assignment),
    };
    this.assigned.add(assignment);
    return assignment;
  }

  /**
   * The key's native balance, read at most every BALANCE_CACHE_MS (one read at a time); a reading younger than
   * BALANCE_STALE_MS answers at once while the next read is under way, one younger than BALANCE_KEPT_ON_FAILURE_MS
   * when that read fails.
   */
  balanceWei(): Promise<bigint> {
    const known = this.balance;
    const age = known ? Date.now() - known.at : Number.POSITIVE_INFINITY;
    if (known && age < BALANCE_CACHE_MS) return Promise.resolve(known.wei);
    const read = this.readBalance();
    if (known && age < BALANCE_STALE_MS) {
      read.catch(() => undefined);
      return Promise.resolve(known.wei);
    }
    if (known && age < BALANCE_KEPT_ON_FAILURE_MS) return read.catch(() => known.wei);
    return read;
  }

  private readBalance(): Promise<bigint> {
    this.balanceRead ??= this.chain
      .balanceWei()
      .then((wei) => {
        this.balance = { wei, at: Date.now() };
        return wei;
      })
      .finally(() => {
        this.balanceRead = undefined;
      });
    return this.balanceRead;
  }
}

/** A key's balance as the pool last read it: undefined when the chain did not answer. */
export interface SignerBalance {
  signer: RelayerSigner;
  wei: bigint | undefined;
  error: string | undefined;
}

/**
 * The relayer's keys. A submission goes to the least loaded key that can pay gas and is not stuck (ties in turn),
 * so a key whose transaction waits (underpriced, dropped, a gap in its nonces) holds up only what it already has:
 * every other key's nonces go on being mined.
 */
export class SignerPool {
  private turn = 0;

  constructor(
    readonly signers: readonly RelayerSigner[],
    private readonly settings: RelayerSettings,
    private readonly logger: ServiceContext<SettlementDB>['logger'],
  ) {
    if (signers.length === 0) throw new Error('a relayer needs at least one key');
  }

  byAddress(address: string): RelayerSigner | undefined {
    const lower = address.toLowerCase();
    return this.signers.find((signer) => signer.address === lower);
  }

  async balances(): Promise<SignerBalance[]> {
    return Promise.all(
      this.signers.map(async (signer) => {
        try {
          return { signer, wei: await signer.balanceWei(), error: undefined };
        } catch (error) {
          return { signer, wei: undefined, error: describe(error) };
        }
      }),
    );
  }

  /**
   * Of keys that are all stuck, those whose oldest waiting transaction has waited at most RELAYER_STUCK_AFTER_MS
   * longer than the least stuck one's: a burst's keys, whose receipts are all late together, share its load; a key
   * whose transaction has waited far longer (dropped, behind a gap in its nonces) gets nothing more.
   */
  private leastStuck(stuck: readonly SignerBalance[], now: number): SignerBalance[] {
    const least = Math.min(...stuck.map(({ signer }) => signer.waitingMs(now)));
    return stuck.filter(({ signer }) => signer.waitingMs(now) - least <= this.settings.stuckAfterMs);
  }

  /**
   * Assigns a submission to a key, or refuses: no key above RELAYER_MIN_BALANCE_WEI (relayer_out_of_gas), or no
   * balance readable at all (chain_unavailable). When every key that can pay is stuck, the least loaded of the least
   * stuck still takes it (refusing would stop x402 for a delay a fee bump will clear): under load every key's
   * receipts can come later than RELAYER_STUCK_AFTER_MS, and the least loaded key of all was then often the one
   * really stuck (few submissions because it was skipped), whose queue never moves.
   */
  async assign(): Promise<Assignment | Refusal> {
    const balances = await this.balances();
    // Chosen after the last await, synchronously: a burst's submissions see each other's assignments.
    const payable = balances.filter(({ wei }) => wei !== undefined && wei >= this.settings.minBalanceWei);
    if (payable.length === 0) {
      const failed = balances.find(({ error }) => error !== undefined);
      if (failed && balances.every(({ wei }) => wei === undefined)) {
        return refusal('chain_unavailable', `the chain RPC did not answer: ${failed.error}`);
      }
      this.logger.error(
        {
          relayers: balances.map(({ signer, wei }) => ({
            address: signer.address,
            balanceWei: wei?.toString(),
          })),
        },
        'every relayer key is out of gas; x402 submissions refused',
      );
      return refusal(
        'relayer_out_of_gas',
        'the relayer cannot pay gas right now; pay with a tx-hash proof instead',
      );
    }
    const now = Date.now();
    const free = payable.filter(({ signer }) => !signer.stuck(now));
    const candidates = (free.length > 0 ? free : this.leastStuck(payable, now)).map(({ signer }) => signer);
    const start = this.turn++ % this.signers.length;
    let chosen: RelayerSigner | undefined;
    // In turn from `start`, the first with the smallest load.
    for (let i = 0; i < this.signers.length; i++) {
      const signer = this.signers[(start + i) % this.signers.length]!;
      if (!candidates.includes(signer)) continue;
      if (!chosen || signer.load() < chosen.load()) chosen = signer;
    }
    return chosen!.assign();
  }
}
