import type { ServiceContext } from '@paygate/runtime';
import type { SettlementDB } from '../db';
import { describe, RelayerSetupError } from '../errors';
import type { RelayerChain } from './chain';
import { NonceAllocator } from './nonce-allocator';
import type { RecordedAuthorizations } from './recorded';
import { chainUnavailable, type Refusal, type RelayerSettings, refusal } from './settings';

const BALANCE_CACHE_MS = 2000;
/** A balance this recent answers while a fresh read is under way: a slow node must not stop x402. */
const BALANCE_STALE_MS = 10_000;
/** A balance this recent answers when its fresh read fails: a dry key's broadcasts are refused by the node anyway. */
const BALANCE_KEPT_ON_FAILURE_MS = 60_000;

/** A submission assigned to a key, until its caller is answered. */
export interface Assignment {
  readonly signer: RelayerSigner;
  /** When its transaction was recorded: from then on it waits for this key's queue. */
  recordedAt: number | undefined;
  release(): void;
}

/** One key of the pool: its own nonce sequence, balance watch, and the submissions this process handed it. */
export class RelayerSigner {
  /** Lowercase, as relayed_authorizations.relayer_address holds it. */
  readonly address: string;
  readonly allocator: NonceAllocator;
  private balance: { wei: bigint; at: number } | undefined;
  private balanceRead: Promise<bigint> | undefined;
  private readonly assigned = new Set<Assignment>();
  /** Set by the background pass: when this key's oldest open row in the table (any replica's) was signed. */
  stuckSince: number | undefined;
  /** The highest nonce among those open rows: once it is mined, the mark is cleared. */
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

  markOpen(oldestOpenAt: number | undefined, highestOpenNonce: bigint | undefined): void {
    this.stuckSince = oldestOpenAt;
    this.openThroughNonce = oldestOpenAt === undefined ? undefined : highestOpenNonce;
  }

  /** The chain mined this key's nonces below `minedNonce`: true when that cleared a stuck mark. */
  minedBelow(minedNonce: bigint, now: number): boolean {
    if (this.openThroughNonce === undefined || minedNonce <= this.openThroughNonce) return false;
    const wasStuck = this.stuck(now);
    this.stuckSince = undefined;
    this.openThroughNonce = undefined;
    return wasStuck && !this.stuck(now);
  }

  /** Whether the background pass's mark (not this process's submissions) says stuck. */
  markedStuck(now: number): boolean {
    return this.stuckSince !== undefined && now - this.stuckSince >= this.settings.stuckAfterMs;
  }

  load(): number {
    return this.assigned.size;
  }

  /** How long this key's oldest transaction has waited for its receipt (the pass's view or this process's). */
  waitingMs(now: number): number {
    let oldest = this.stuckSince;
    for (const assignment of this.assigned) {
      if (assignment.recordedAt !== undefined)
        oldest = Math.min(oldest ?? assignment.recordedAt, assignment.recordedAt);
    }
    return oldest === undefined ? 0 : Math.max(0, now - oldest);
  }

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

type SignerBalance = Awaited<ReturnType<SignerPool['balances']>>[number];

/** The relayer's keys: a key whose transaction waits holds up only what it already has. */
export class SignerPool {
  private turn = 0;

  constructor(
    readonly signers: readonly RelayerSigner[],
    private readonly settings: RelayerSettings,
    private readonly logger: ServiceContext<SettlementDB>['logger'],
  ) {
    if (signers.length === 0) throw new RelayerSetupError('a relayer needs at least one key');
  }

  byAddress(address: string): RelayerSigner | undefined {
    const lower = address.toLowerCase();
    return this.signers.find((signer) => signer.address === lower);
  }

  async balances() {
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

  /** Of stuck keys, those within RELAYER_STUCK_AFTER_MS of the least stuck: a burst's late keys share the load. */
  private leastStuck(stuck: readonly SignerBalance[], now: number): SignerBalance[] {
    const least = Math.min(...stuck.map(({ signer }) => signer.waitingMs(now)));
    return stuck.filter(({ signer }) => signer.waitingMs(now) - least <= this.settings.stuckAfterMs);
  }

  /** The least loaded payable key not stuck (ties in turn); all stuck, the least stuck still take it. */
  async assign(): Promise<Assignment | Refusal> {
    const balances = await this.balances();
    // Chosen after the last await, synchronously: a burst's submissions see each other's assignments.
    const payable = balances.filter(({ wei }) => wei !== undefined && wei >= this.settings.minBalanceWei);
    if (payable.length === 0) {
      const failed = balances.find(({ error }) => error !== undefined);
      if (failed && balances.every(({ wei }) => wei === undefined)) {
        return chainUnavailable(failed.error);
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
    for (let i = 0; i < this.signers.length; i++) {
      const signer = this.signers[(start + i) % this.signers.length]!;
      if (!candidates.includes(signer)) continue;
      if (!chosen || signer.load() < chosen.load()) chosen = signer;
    }
    return chosen!.assign();
  }
}
