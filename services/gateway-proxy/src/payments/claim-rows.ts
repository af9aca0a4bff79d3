import { WriteBatcher } from '@paygate/runtime';
import { sql } from 'kysely';
import type { GatewayContext } from '../db';
import { ClaimBatchRefused, LedgerClaimRefused } from '../errors';
import {
  type ClaimOptions,
  type ClaimToWrite,
  gatewayPaymentId,
  NO_RECORD,
  type ProvenTransfer,
  type RecordedClaim,
  type RecordStatement,
  writeClaims,
} from './claim-statement';
import type { LedgerClaims, TransferToClaim } from './claims';
import type { PaymentFailure } from './failures';
import type { PaymentClaim, PaymentSettings, Purchase } from './types';

interface QueuedClaim extends ClaimToWrite {
  /** The ledger's answer to this claim: undefined when the transfer is this payment's. */
  ledgerAnswer: Promise<PaymentFailure | undefined>;
  resolve(result: RecordedClaim): void;
  reject(error: unknown): void;
}

/** Claim statements written at once (the gateway's pool has DB_POOL_SIZE connections; 4 in tests). */
const MAX_CLAIM_WRITES = 2;
/** Claims in one statement at most. */
const MAX_CLAIMS_PER_STATEMENT = 25;

/** This gateway's payment_claims rows: claimed (with the ledger's claim and payment.confirmed), read, updated. */
export class PaymentClaimRows {
  /**
   * One claim per transfer in a statement (two of one transfer would update one row twice), records of one kind;
   * the claims that came while MAX_CLAIM_WRITES statements were being written go in the next one.
   */
  private readonly batcher = new WriteBatcher<QueuedClaim>({
    maxWrites: MAX_CLAIM_WRITES,
    maxPerWrite: MAX_CLAIMS_PER_STATEMENT,
    fits: (batch, item) =>
      !batch.some(
        (other) =>
          other.transfer.txHash.toLowerCase() === item.transfer.txHash.toLowerCase() ||
          other.record.kind !== item.record.kind,
      ),
    write: (batch) => this.writeBatch(batch),
  });

  constructor(
    private readonly ctx: GatewayContext,
    private readonly settings: PaymentSettings,
    private readonly ledger: LedgerClaims,
  ) {}

  /**
   * Claims an on-chain transfer for a purchase: one row per `network:txHash` (a unique constraint). Undefined when
   * the transfer was already claimed.
   *
   * The ledger claims the transfer and books the purchase as its payment (`ledger.claim_transfer`, one ledger
   * transaction that also publishes payment.confirmed) while the row is written, and the row commits only once the
   * ledger agreed: one transfer buys one thing whatever path claims it (checkout sessions, /api/verify, operator
   * refunds). Every replica asks with the same reference (`<network>:<txHash>`) and payment id, so a concurrent
   * presentation here is answered ok too (booked once) and the local row decides which presentation is served.
   * Throws LedgerClaimRefused when the ledger refuses (another path spent it) or does not answer in time.
   */
  async insert(
    transfer: ProvenTransfer,
    purchase: Purchase,
    options: ClaimOptions = {},
  ): Promise<PaymentClaim | undefined> {
    return (await this.insertRecorded(transfer, purchase, options, NO_RECORD)).claim;
  }

  /**
   * Claims a transfer like `insert`, and records it elsewhere in the same statement: `record` (RecordStatement)
   * names one more data-modifying statement that reads the claim rows (none: the transfer was claimed before) and
   * returns a row for each record it wrote. x402 records the included transfer on its authorization this way, so a
   * settled payment costs one statement here, written while the ledger answers.
   *
   * The ledger is asked and the statement written at the same time, as `insert` does: the statement runs in a
   * transaction that commits only once the ledger answered that the transfer is this payment's (rolled back when
   * it refused: nothing is written), so the answer waits for the slower of the two rather than for both in turn.
   * A crash before the commit leaves at most the ledger's claim and booking under this gateway's reference and
   * payment id, which answers the same claim again ok without booking again (the recovery pass claims it). Claims that come while others are being written go out
   * together, as one statement (one round trip, one commit); each claim's outcome is its own: when the ledger
   * refused some of a batch, the batch is rolled back and written again without them. Throws LedgerClaimRefused
   * like `insert`.
   */
  async insertRecorded(
    transfer: ProvenTransfer,
    purchase: Purchase,
    options: ClaimOptions,
    record: RecordStatement,
  ): Promise<RecordedClaim> {
    const ledgerAnswer = this.ledger.claim(this.ledgerClaimOf(transfer, purchase));
    // Awaited in the batch's transaction; one that fails to begin must not leave the answer's failure unhandled.
    ledgerAnswer.catch(() => undefined);
    return new Promise<RecordedClaim>((resolve, reject) =>
      this.batcher.add({ transfer, purchase, options, record, ledgerAnswer, resolve, reject }),
    );
  }

  /**
   * One statement for the batch, committed once the ledger agreed to every claim in it. Claims the ledger refused
   * are refused (LedgerClaimRefused) and the rest written again without them; when the statement fails, each
   * claim alone (one claim's failure is only its own).
   */
  private async writeBatch(batch: QueuedClaim[]): Promise<void> {
    try {
      const results = await this.ctx.db.transaction().execute(async (trx) => {
        const written = await writeClaims(trx, this.settings, batch);
        const answers = await Promise.all(batch.map((item) => item.ledgerAnswer));
        if (answers.some((answer) => answer !== undefined)) throw new ClaimBatchRefused(answers);
        return written;
      });
      for (const [i, item] of batch.entries()) item.resolve(results[i]!);
    } catch (error) {
      if (error instanceof ClaimBatchRefused) {
        const agreed = batch.filter((item, i) => {
          const answer = error.answers[i];
          if (answer) item.reject(new LedgerClaimRefused(answer));
          return !answer;
        });
        if (agreed.length > 0) await this.writeBatch(agreed);
        return;
      }
      if (batch.length === 1) {
        batch[0]!.reject(error);
        return;
      }
      for (const item of batch) await this.writeBatch([item]);
    }
  }

  /** The ledger's command: claim the transfer and book this purchase as its payment (gatewayPaymentId). */
  private ledgerClaimOf(transfer: ProvenTransfer, purchase: Purchase): TransferToClaim {
    const network = this.settings.network as TransferToClaim['payment']['network'];
    return {
      chainId: this.settings.chainId,
      txHash: transfer.txHash.toLowerCase(),
      logIndex: transfer.logIndex,
      claimedVia: purchase.claimedVia === 'verify' ? 'verify' : 'x402',
      reference: `${this.settings.network}:${transfer.txHash.toLowerCase()}`,
      payer: transfer.payer,
      amountMicro: transfer.amountMicro,
      payment: {
        paymentId: gatewayPaymentId(this.settings.network, transfer.txHash),
        source: 'x402',
        sellerId: purchase.sellerId,
        skillId: purchase.skillId,
        skillName: purchase.skillName,
        endpointId: purchase.endpointId,
        sessionId: null,
        network,
        token: transfer.token,
        holdPeriodHours: purchase.holdPeriodHours,
      },
    };
  }

  /** The claim made on a transaction, if any. */
  async find(network: string, txHash: string): Promise<PaymentClaim | undefined> {
    return (await this.ctx.db
      .selectFrom('payment_claims')
      .selectAll()
      .where('network', '=', network)
      .where('tx_hash', '=', txHash)
      .executeTakeFirst()) as PaymentClaim | undefined;
  }

  /**
   * A pay-per-call in flight again for a retry: when its seller call failed (retryable), or its last attempt went
   * stale (the gateway died mid-call, or the attempt outlived its bounds), within the retry window (which starts at
   * the first failure, or at the claim for an attempt that never came back). Undefined when it may not be retried.
   * The returned row carries the new attempt number: only that attempt may book the outcome (attemptOf).
   */
  async reopenForRetry(claim: PaymentClaim): Promise<PaymentClaim | undefined> {
    const now = this.settings.now();
    const staleBefore = attemptsLiveAfter(now, this.settings.upstreamTimeoutMs);
    const windowMs = this.settings.retryWindowSeconds * 1000;
    return (await this.ctx.db
      .updateTable('payment_claims')
      .set((eb: any) => ({ state: 'in_flight', attempts: eb('attempts', '+', 1), updated_at: now }))
      .where('id', '=', claim.id)
      .where(
        sql`coalesce(retry_until, created_at + ${sql.lit(windowMs)} * interval '1 millisecond')`,
        '>',
        now,
      )
      .where('attempts', '<', 50)
      .where((eb: any) =>
        eb.or([
          eb('state', '=', 'retryable'),
          eb.and([eb('state', '=', 'in_flight'), eb('updated_at', '<', staleBefore)]),
        ]),
      )
      .returningAll()
      .executeTakeFirst()) as PaymentClaim | undefined;
  }

  /** The seller answered: the pay-per-call payment is spent. */
  markServed(claim: PaymentClaim): undefined | Promise<void> {
    // A subscription stays usable: nothing to write (and no promise on its repeated call).
    if (claim.kind === 'subscription') return undefined;
    return this.ctx.db
      .updateTable('payment_claims')
      .set({ state: 'served', updated_at: this.settings.now() })
      .where((eb: any) => eb.and(attemptOf(claim)))
      .execute()
      .then(() => undefined);
  }
}

/**
 * The claim row as this attempt left it (in flight, its attempt number): a seller call's outcome is booked only
 * by the attempt still holding the claim, so a late answer of an attempt a retry took over changes nothing.
 */
export const attemptOf = (claim: Pick<PaymentClaim, 'id' | 'attempts'>) => ({
  id: claim.id,
  state: 'in_flight',
  attempts: claim.attempts,
});

/** Room for an attempt's bookkeeping after its forward's bounds. */
const BOOKKEEPING_MS = 5000;

/**
 * The oldest moment an attempt still in flight may have started and still answer: it reads the buyer's body (at
 * most the upstream timeout), then waits for the seller's headers (the same bound again), then books. An in-flight
 * claim last taken before this has no live attempt: its replica died mid-call (or the attempt outlived its bounds).
 */
export const attemptsLiveAfter = (now: Date, upstreamTimeoutMs: number) =>
  new Date(now.getTime() - 2 * upstreamTimeoutMs - BOOKKEEPING_MS);
