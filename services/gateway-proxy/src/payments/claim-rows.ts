import { LedgerClaimClient, type LedgerClaimRequest } from '@paygate/bus';
import { formatUsdc } from '@paygate/money';
import { WriteBatcher } from '@paygate/runtime';
import { sql } from 'kysely';
import type { GatewayContext } from '../db';
import { ClaimBatchRefused, LedgerClaimRefused } from '../errors';
import {
  type ClaimOptions,
  type ClaimToWrite,
  gatewayPaymentId,
  type ProvenTransfer,
  type RecordedClaim,
  type RecordStatement,
  writeClaims,
} from './claim-statement';
import { failure, type PaymentFailure } from './failures';
import type { PaymentClaim, PaymentSettings, Purchase } from './types';

interface QueuedClaim extends ClaimToWrite {
  ledgerAnswer: Promise<PaymentFailure | undefined>;
  resolve(result: RecordedClaim): void;
  reject(error: unknown): void;
}

/** Claim statements written at once (the pool has DB_POOL_SIZE connections; 4 in tests). */
const MAX_CLAIM_WRITES = 2;
const MAX_CLAIMS_PER_STATEMENT = 25;

export class PaymentClaimRows {
  /** One claim per transfer and one record kind per statement (two of one transfer would update a row twice). */
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

  private readonly ledger: LedgerClaimClient;

  constructor(
    private readonly ctx: GatewayContext,
    private readonly settings: PaymentSettings,
  ) {
    this.ledger = new LedgerClaimClient(ctx.bus);
  }

  /**
   * Claims a transfer with `record` (claim undefined when claimed before); the transaction commits only once the
   * ledger agreed (a crash leaves only its claim); throws LedgerClaimRefused when the ledger refuses or is silent.
   */
  async insertRecorded(
    transfer: ProvenTransfer,
    purchase: Purchase,
    options: ClaimOptions,
    record: RecordStatement,
  ): Promise<RecordedClaim> {
    const ledgerAnswer = this.askLedger(this.ledgerClaimOf(transfer, purchase));
    // Awaited in the batch's transaction; one that fails to begin must not leave it unhandled.
    ledgerAnswer.catch(() => undefined);
    return new Promise<RecordedClaim>((resolve, reject) =>
      this.batcher.add({ transfer, purchase, options, record, ledgerAnswer, resolve, reject }),
    );
  }

  /** One statement per batch; claims the ledger refused are rejected and the rest written again without them. */
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

  /** The ledger books the transfer for this payment before it is served (a silent one: 503, never served unpaid). */
  private async askLedger(request: LedgerClaimRequest): Promise<PaymentFailure | undefined> {
    const answer = await this.ledger.claim(request);
    if (answer.ok) return undefined;
    if (answer.reason === 'claimed_elsewhere') {
      return failure(
        'payment_already_used',
        `payment already used for ${answer.claimedBy}: ${answer.message}`,
        { claimedBy: answer.claimedBy },
      );
    }
    const { logger } = this.ctx;
    if (answer.reason === 'ledger_unavailable' && answer.error) {
      logger.warn({ err: answer.error, txHash: request.txHash }, 'ledger did not answer a claim');
    } else {
      logger.error({ answer, txHash: request.txHash }, 'ledger refused a claim unexpectedly');
    }
    return failure('claim_unavailable', 'the ledger could not record this payment; present it again shortly');
  }

  private ledgerClaimOf(transfer: ProvenTransfer, purchase: Purchase): LedgerClaimRequest {
    const network = this.settings.network as NonNullable<LedgerClaimRequest['payment']>['network'];
    return {
      chainId: this.settings.chainId,
      txHash: transfer.txHash.toLowerCase(),
      logIndex: transfer.logIndex,
      claimedVia: purchase.claimedVia === 'verify' ? 'verify' : 'x402',
      reference: `${this.settings.network}:${transfer.txHash.toLowerCase()}`,
      payer: transfer.payer,
      amount: formatUsdc(transfer.amountMicro),
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

  async find(network: string, txHash: string): Promise<PaymentClaim | undefined> {
    return (await this.ctx.db
      .selectFrom('payment_claims')
      .selectAll()
      .where('network', '=', network)
      .where('tx_hash', '=', txHash)
      .executeTakeFirst()) as PaymentClaim | undefined;
  }

  /** A pay-per-call in flight again for a retry within its window, with the attempt number that alone may book it. */
  async reopenForRetry(claim: PaymentClaim): Promise<PaymentClaim | undefined> {
    const now = this.settings.now();
    const staleBefore = attemptsLiveAfter(now, this.settings.upstreamTimeoutMs);
    return (await this.ctx.db
      .updateTable('payment_claims')
      .set((eb: any) => ({ state: 'in_flight', attempts: eb('attempts', '+', 1), updated_at: now }))
      .where('id', '=', claim.id)
      .where(retryWindowEnd(this.settings.retryWindowSeconds), '>', now)
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

/** The row as this attempt left it: only the attempt holding the claim books the seller call's outcome. */
export const attemptOf = (claim: Pick<PaymentClaim, 'id' | 'attempts'>) => ({
  id: claim.id,
  state: 'in_flight',
  attempts: claim.attempts,
});

/** A claim's retry window ends at its retry_until, else (it never failed) a window after it was made. */
export const retryWindowEnd = (retryWindowSeconds: number) =>
  sql`coalesce(retry_until, created_at + ${sql.lit(retryWindowSeconds * 1000)} * interval '1 millisecond')`;

const BOOKKEEPING_MS = 5000;

/** An in-flight claim taken before this has no live attempt (body read + headers wait, each the upstream timeout). */
export const attemptsLiveAfter = (now: Date, upstreamTimeoutMs: number) =>
  new Date(now.getTime() - 2 * upstreamTimeoutMs - BOOKKEEPING_MS);
