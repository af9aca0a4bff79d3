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

  constructor(
    ctx: ServiceContext<SettlementDB>,
    readonly chain: RelayerChain,
    private readonly settings: RelayerSettings,
    recorded: RecordedAuthorizations,
  ) {
    this.address = chain.address.toLowerCase();
    this.allocator = new NonceAllocator(ctx, chain, settings, recorded);
  }

  /** Submissions of this process assigned to this key and not answered yet. */
  load(): number {
    return this.assigned.size;
  }

  /** Whether a transaction of this key has waited longer than RELAYER_STUCK_AFTER_MS for its receipt. */
  stuck(now: number): boolean {
    if (this.stuckSince !== undefined && now - this.stuckSince >= this.settings.stuckAfterMs) return true;
    for (const assignment of this.assigned) {
      if (assignment.recordedAt !== undefined && now - assignment.recordedAt >= this.settings.stuckAfterMs) {
        return true;
      }
    }
    return false;
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
   * BALANCE_STALE_MS answers at once while the next read is under way.
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
   * Assigns a submission to a key, or refuses: no key above RELAYER_MIN_BALANCE_WEI (relayer_out_of_gas), or no
   * balance readable at all (chain_unavailable). When every key that can pay is stuck, the least loaded of them
   * still takes it (refusing would stop x402 for a delay a fee bump will clear).
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
    const candidates = (free.length > 0 ? free : payable).map(({ signer }) => signer);
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
