import { serveRpc } from '@paygate/bus';
import { type ClaimedVia, type RpcReply, type RpcRequest, refundTakesOverClaim } from '@paygate/contracts';
import { formatUsdc, parseChainUsdc } from '@paygate/money';
import { type BackgroundTask, Counter, isTransactionConflict, WriteBatcher } from '@paygate/runtime';
import { sql } from 'kysely';
import type { LedgerDb, LedgerTrx } from '../db';
import type { LedgerContext, LedgerDeps } from '../deps';
import { newClaimId } from '../ids';
import { transferKey } from '../ledger/entries';
import { bookedTransferDiffers } from '../payments/transfer-booking';
import {
  type ClaimedAndBooked,
  type ClaimOutcomeRow,
  type ClaimRequest,
  type ClaimRow,
  claimAndBook,
  claimKeyOf,
} from './statement';

type ClaimReply = RpcReply<'ledger.claim_transfer'>;

/** What a claim through each payment path spent the transfer on, for the refusal message. */
const CLAIMED_VIA_PURPOSE: Record<ClaimedVia, string> = {
  x402: 'a paid API call (x402 proof)',
  verify: "a seller's POST /api/verify",
  checkout: 'a checkout session',
  operator_refund: 'an operator refund to its sender',
};

function claimOperatorRefund(ctx: LedgerContext, deps: LedgerDeps, request: ClaimRequest) {
  return ctx.inTransaction(async (trx) => {
    const refused = await refundRefusedByBooks(trx, request);
    if (refused) return refused;
    const [claimed] = await claimAndBook(trx, [request], deps);
    return decideClaim(trx, deps, request, claimed!.held);
  });
}

/** How long after a claim transaction its events are published (the relay's poll is 250 ms). */
const PUBLISH_AFTER_MS = 100;

interface QueuedClaim {
  request: ClaimRequest;
  /** claimKeyOf(request), computed once: fits compares it with every claim of the batch being filled. */
  key: string;
  resolve(reply: ClaimReply): void;
  reject(error: unknown): void;
}

/**
 * The one command that spends an on-chain transfer and books what it pays for. The first (claimed_via, reference)
 * holds the transfer (`transfer_claims`' primary key decides between replicas); with a payment, the claim, its
 * booking and its `payment.confirmed` are one transaction. A repeat of the pair is answered ok again (fresh: false);
 * anything else is refused with who holds it. Claims arriving together are one statement, each deciding as alone:
 * two claims of one transfer never share one, and a failed statement runs again claim by claim. An operator refund
 * reads the books and may take over an underpaid session's claim, so it runs alone, in a transaction.
 */
export class ClaimBatcher implements BackgroundTask {
  private readonly batcher: WriteBatcher<QueuedClaim>;
  private served: { stop(): Promise<void> } | undefined;
  private readonly outcomes: Counter<'claimed_via' | 'outcome'>;

  constructor(
    private readonly ctx: LedgerContext,
    private readonly deps: LedgerDeps,
  ) {
    this.outcomes = new Counter({
      name: 'ledger_transfer_claims_total',
      help: 'Claims on transfers by payment path (claimed_via) and outcome (claimed, repeated, or the refusal reason)',
      labelNames: ['claimed_via', 'outcome'] as const,
      registers: [ctx.metrics.registry],
    });
    this.batcher = new WriteBatcher<QueuedClaim>({
      // PAYMENT_CONCURRENCY transactions in flight per replica, PAYMENT_BATCH_SIZE claims in one at most.
      maxWrites: deps.config.paymentConcurrency,
      maxPerWrite: deps.config.paymentBatchSize,
      // A claim of a transfer a transaction in flight is claiming waits for it (its insert would wait on that
      // transaction's row, and hold up every claim of its own batch meanwhile), then is answered from its row.
      fits: (batch, item) => !this.writing.has(item.key) && !batch.some((other) => other.key === item.key),
      write: (batch) => this.writeBatch(batch),
    });
  }

  /** The transfers of the transactions in flight on this replica. */
  private readonly writing = new Set<string>();

  async start(): Promise<void> {
    this.served = await serveRpc(
      this.ctx.bus,
      'ledger.claim_transfer',
      async (request) => {
        const reply = await this.claim(request);
        const outcome = reply.ok ? (reply.fresh ? 'claimed' : 'repeated') : reply.reason;
        this.outcomes.inc({ claimed_via: request.claimedVia, outcome });
        return reply;
      },
      this.ctx.logger,
    );
  }

  async stop(): Promise<void> {
    await this.served?.stop();
  }

  private claim(request: RpcRequest<'ledger.claim_transfer'>): Promise<ClaimReply> {
    if (request.claimedVia === 'operator_refund') return claimOperatorRefund(this.ctx, this.deps, request);
    const key = claimKeyOf(request);
    return new Promise<ClaimReply>((resolve, reject) => this.batcher.add({ request, key, resolve, reject }));
  }

  /** One transaction for the batch; when it fails, each claim alone (one claim's failure is only its own). */
  private async writeBatch(batch: QueuedClaim[]): Promise<void> {
    for (const item of batch) this.writing.add(item.key);
    try {
      const replies = await this.claimAndBook(batch.map((item) => item.request));
      for (const [i, item] of batch.entries()) item.resolve(replies[i]!);
    } catch (error) {
      if (batch.length === 1) batch[0]!.reject(error);
      else
        await Promise.all(
          batch.map((item) =>
            this.claimAndBook([item.request]).then(([reply]) => item.resolve(reply!), item.reject),
          ),
        );
    } finally {
      for (const item of batch) this.writing.delete(item.key);
    }
  }

  /**
   * The claims and their payments in one statement (its own transaction), then each claim's reply, decided after
   * the commit: a gateway's or checkout's claim never takes another over (only claimOperatorRefund does).
   */
  private async claimAndBook(requests: ClaimRequest[]): Promise<ClaimReply[]> {
    const started = performance.now();
    const outcomes = await statementRetryingConflicts(
      () => claimAndBook(this.ctx.db, requests, this.deps),
      (error, attempt) =>
        this.deps.logger.warn(
          { err: error, attempt },
          'claim statement aborted by a conflict; running it again',
        ),
    );
    this.deps.logger.debug({ size: requests.length, ms: performance.now() - started }, 'batch booked');
    // Their payment.confirmed go out once a burst's answers did, not between them.
    this.ctx.relay.kickSoon(PUBLISH_AFTER_MS);
    return Promise.all(
      requests.map((request, i) =>
        decideClaim(this.ctx.db, this.deps, request, answeredAs(request, outcomes[i]!)),
      ),
    );
  }
}

/** The claim as its reply names it: with the payment booked now, or the one booked before (a repeat). */
function answeredAs(request: ClaimRequest, { held, booking }: ClaimedAndBooked): ClaimOutcomeRow {
  if (!booking || !request.payment) return held;
  return {
    ...held,
    payment_id: booking.outcome === 'duplicate' ? held.payment_id : request.payment.paymentId,
    transaction_id: booking.transactionId ?? held.transaction_id,
  };
}

/** Runs a statement (its own transaction) up to three times when Postgres aborts it for a deadlock or conflict. */
async function statementRetryingConflicts<T>(
  run: () => Promise<T>,
  onConflict: (error: unknown, attempt: number) => void,
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await run();
    } catch (error) {
      if (!isTransactionConflict(error) || attempt >= 3) throw error;
      onConflict(error, attempt);
      // Apart, so the two sides of a deadlock do not meet again at once.
      await new Promise((resolve) => setTimeout(resolve, 5 + Math.random() * 20 * attempt));
    }
  }
}

/** An operator refund of a transfer the books know with another payer or amount, or reorged away: refused. */
async function refundRefusedByBooks(trx: LedgerTrx, request: ClaimRequest): Promise<ClaimReply | undefined> {
  const txHash = request.txHash.toLowerCase();
  const booked = await trx
    .selectFrom('transfers')
    .select(['amount_micro', 'from_address', 'status'])
    .where((eb) => eb.and({ chain_id: request.chainId, tx_hash: txHash, log_index: request.logIndex }))
    .executeTakeFirst();
  if (!booked) return undefined;
  const refusal = bookedTransferDiffers({ amount: request.amount, from: request.payer }, booked);
  if (!refusal) return undefined;
  return {
    ok: false,
    reason: refusal,
    message: `transfer ${transferKey(request.chainId, txHash, request.logIndex)} cannot be refunded as requested: ${refusal.replace('_', ' ')} on the ledger's books`,
    booked: { from: booked.from_address, amount: formatUsdc(booked.amount_micro) },
  };
}

/** The payment a claim booked, as its reply names it (absent fields: none, or not booked). */
function bookedPaymentOf(held: ClaimOutcomeRow): { paymentId?: string; transactionId?: string } {
  return {
    ...(held.payment_id ? { paymentId: held.payment_id } : {}),
    ...(held.payment_id && held.transaction_id ? { transactionId: held.transaction_id } : {}),
  };
}

/** The reply to a claim from what its statement found (`held`); an operator refund may take a claim over here. */
async function decideClaim(
  db: LedgerDb,
  deps: LedgerDeps,
  request: ClaimRequest,
  held: ClaimOutcomeRow,
): Promise<ClaimReply> {
  const txHash = request.txHash.toLowerCase();
  const key = transferKey(request.chainId, txHash, request.logIndex);
  const now = deps.now();
  const claimedAt = new Date(held.claimed_at).toISOString();
  if (held.fresh || (held.claimed_via === request.claimedVia && held.reference === request.reference)) {
    return { ok: true, claimId: held.claim_id, fresh: held.fresh, claimedAt, ...bookedPaymentOf(held) };
  }
  // An operator returns the short transfer of an underpaid checkout session: checkout's claim for that session
  // paid for nothing, so the refund takes it over, unless a payment of the transfer is booked (a seller's money).
  if (refundTakesOverClaim({ claimedVia: held.claimed_via, reference: held.reference }, request)) {
    const payer = request.payer.toLowerCase();
    const payment = (
      await sql<{ id: string }>`select id from transactions
        where chain_id = ${request.chainId} and tx_hash = ${txHash} and log_index = ${request.logIndex}
          and escrow_status <> 'reversed'
        limit 1`.execute(db)
    ).rows[0];
    if (!payment) {
      const claimId = newClaimId();
      const taken = (
        await sql<ClaimRow>`update transfer_claims
          set claim_id = ${claimId}, claimed_via = 'operator_refund', reference = ${request.reference},
            payer = ${payer}, amount_micro = ${parseChainUsdc(request.amount)}, claimed_at = ${now},
            payment_id = null
          where chain_id = ${request.chainId} and tx_hash = ${txHash} and log_index = ${request.logIndex}
            and claim_id = ${held.claim_id}
          returning claim_id, claimed_via, reference, claimed_at, payment_id`.execute(db)
      ).rows[0];
      if (taken) {
        deps.logger.info(
          { transfer: key, sessionId: request.underpaidSessionId, claimId },
          'underpaid session claim released to an operator refund',
        );
        return { ok: true, claimId, fresh: true, claimedAt: now.toISOString() };
      }
    }
  }
  deps.logger.warn(
    { transfer: key, heldBy: held.claimed_via, refused: request.claimedVia },
    'second claim on a transfer refused',
  );
  return {
    ok: false,
    reason: 'claimed_elsewhere',
    message: `transfer ${key} already paid for ${CLAIMED_VIA_PURPOSE[held.claimed_via]}`,
    claimedBy: { claimedVia: held.claimed_via, claimedAt },
  };
}
