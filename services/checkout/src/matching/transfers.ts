import { randomBytes } from 'node:crypto';
import { enqueueEvent } from '@paygate/bus';
import { createEvent, type EventData } from '@paygate/contracts';
import { HttpError } from '@paygate/http';
import { formatUsdcExact, parseChainUsdc } from '@paygate/money';
import { currentTraceCarrier, type Logger } from '@paygate/telemetry';
import { sql } from 'kysely';
import type { CheckoutConfig } from '../config';
import type { CheckoutTrx, SessionRow, SessionStatus, TransferRow } from '../db';
import { enqueueSessionEvent } from '../sessions/snapshot';
import type { LedgerClaims } from './claims';

type Observed = EventData<'transfer.observed'>;
type Reorged = EventData<'transfer.reorged'>;
type Claimed = EventData<'transfer.claimed'>;

/** An operator action the ledger refused because the transfer is not this action's to spend. */
export interface ClaimRefusal {
  refused: { status: 409; code: string; message: string; claimedBy?: string };
  transfer: TransferRow;
}

/** Serialises everything checkout decides about one transfer (observed vs claimed elsewhere) across replicas. */
const lockTransferKey = (trx: CheckoutTrx, chainId: number, txHash: string, logIndex: number) =>
  sql`select pg_advisory_xact_lock(hashtextextended(${`checkout-transfer:${chainId}:${txHash.toLowerCase()}:${logIndex}`}, 0))`.execute(
    trx,
  );

const newTransferId = () => `tr_${randomBytes(12).toString('hex')}`;
const newPaymentId = () => `pay_${randomBytes(12).toString('hex')}`;
const newRefundRequestId = () => `trr_${randomBytes(12).toString('hex')}`;

/** The outcome of applying a transfer to a session, decided by amount and time. */
export function outcomeFor(session: SessionRow, amountMicro: bigint, now: Date): SessionStatus {
  if (amountMicro < session.exact_amount_micro) return 'underpaid';
  if (amountMicro > session.exact_amount_micro) return 'overpaid';
  return now < session.expires_at ? 'paid' : 'paid_late';
}

/**
 * Turns confirmed transfers into session payments. A transfer to a session's own deposit address pays that
 * session: exactly its amount `paid` (`paid_late` after expiry), more `overpaid` (a payment of what was received),
 * less `underpaid` (no payment; an operator returns it). The first transfer to an address decides; a later one is
 * kept as unmatched (`session_already_paid`) for an operator, like anything that pays no session.
 * payment.confirmed goes out once per applied transfer (unique indexes on payments), and a reorg reverses it.
 */
export class TransferMatcher {
  constructor(
    private readonly config: CheckoutConfig,
    private readonly logger: Logger,
    private readonly claims: LedgerClaims,
  ) {}

  async onObserved(trx: CheckoutTrx, data: Observed): Promise<void> {
    const now = this.config.now();
    // Read from the chain: booked whatever its size (not the cap on typed amounts).
    const amountMicro = parseChainUsdc(data.amount);
    await lockTransferKey(trx, data.chainId, data.txHash, data.logIndex);
    const existing = await trx
      .selectFrom('transfers')
      .selectAll()
      .where('chain_id', '=', data.chainId)
      .where('tx_hash', '=', data.txHash.toLowerCase())
      .where('log_index', '=', data.logIndex)
      .forUpdate()
      .executeTakeFirst();
    if (existing && existing.status !== 'reorged') return; // already applied (a re-publish by the indexer)
    const fields = {
      chain_id: data.chainId,
      network: data.network,
      tx_hash: data.txHash.toLowerCase(),
      log_index: data.logIndex,
      block_number: BigInt(data.blockNumber),
      block_hash: data.blockHash.toLowerCase(),
      from_address: data.from,
      to_address: data.to,
      token_address: data.token,
      amount_micro: amountMicro,
      observed_at: now,
      updated_at: now,
    };
    const reason = this.rejectReason(data);
    let session: SessionRow | undefined;
    let unmatchedReason = reason;
    let candidate: string | null = null;
    if (!reason) {
      const found = await this.sessionPaidBy(trx, data, amountMicro);
      session = found.session;
      unmatchedReason = found.unmatchedReason;
      if (session && session.late_until <= now) {
        unmatchedReason = 'late_window_passed';
        candidate = session.session_id;
        session = undefined;
      } else if (session && session.transfer_id !== null) {
        unmatchedReason = 'session_already_paid';
        candidate = session.session_id;
        session = undefined;
      }
    }
    // A session's payment first claims the transfer at the ledger: a transfer an x402 call (or anything else)
    // already spent leaves the session open and is recorded as claimed elsewhere, never paid twice.
    let claimedBy: string | null = null;
    if (session) {
      const claim = await this.claims.claim(
        {
          chain_id: data.chainId,
          tx_hash: data.txHash.toLowerCase(),
          log_index: data.logIndex,
          from_address: data.from,
          amount_micro: amountMicro,
        },
        'checkout',
        session.session_id,
      );
      if (!claim.ok) {
        if (claim.reason !== 'claimed_elsewhere')
          throw new Error(`unexpected claim refusal: ${claim.message}`);
        claimedBy = claim.claimedBy;
        candidate = session.session_id;
        session = undefined;
      }
    } else if (!reason) {
      // Money in escrow that paid no session: another channel may have claimed it already.
      const known = await trx
        .selectFrom('claimed_transfers')
        .select('channel')
        .where('chain_id', '=', data.chainId)
        .where('tx_hash', '=', data.txHash.toLowerCase())
        .where('log_index', '=', data.logIndex)
        .executeTakeFirst();
      claimedBy = known?.channel ?? null;
    }
    if (claimedBy) unmatchedReason = `claimed_by_${claimedBy}`;
    const status = session ? 'matched' : claimedBy ? 'claimed' : 'unmatched';
    const transfer = existing
      ? await trx
          .updateTable('transfers')
          .set({
            ...fields,
            status,
            unmatched_reason: unmatchedReason,
            candidate_session_id: candidate,
            session_id: session?.session_id ?? null,
            resolution_note: null,
            resolved_at: null,
          })
          .where('transfer_id', '=', existing.transfer_id)
          .returningAll()
          .executeTakeFirstOrThrow()
      : await trx
          .insertInto('transfers')
          .values({
            ...fields,
            transfer_id: newTransferId(),
            status,
            unmatched_reason: unmatchedReason,
            candidate_session_id: candidate,
            session_id: session?.session_id ?? null,
            resolution_note: null,
            resolved_at: null,
          })
          .returningAll()
          .executeTakeFirstOrThrow();
    if (!session) {
      if (claimedBy) {
        this.logger.info(
          { txHash: data.txHash, logIndex: data.logIndex, claimedBy, candidateSessionId: candidate },
          'transfer already claimed by another channel; not unmatched',
        );
        return;
      }
      this.logger.warn(
        { txHash: data.txHash, logIndex: data.logIndex, amount: data.amount, reason: unmatchedReason },
        'transfer matches no session; kept as unmatched',
      );
      return;
    }
    await this.applyToSession(trx, session, transfer, outcomeFor(session, amountMicro, now));
  }

  /** Money that is not USDC on this chain (the ledger never booked it). */
  private rejectReason(data: Observed): string | null {
    if (data.chainId !== this.config.chainId) return 'wrong_chain';
    if (data.token.toLowerCase() !== this.config.usdcAddress.toLowerCase()) return 'wrong_token';
    return null;
  }

  /**
   * The session a transfer pays, locked, decided by the address the payer sent to (never by its amount alone):
   * - a session's own deposit address: that session, whatever the amount (outcomeFor: underpaid, paid, overpaid);
   * - the agent escrow (where 402 payments go): none, `paid_to_agent_escrow` (an x402 proof claims it, or an
   *   operator resolves it), so a session can never capture an agent's payment;
   * - the old shared deposit wallet: the session from before deposit addresses that reserves exactly this amount
   *   (only those sessions reserve amounts, and only there, so nothing else can collide with it);
   * - anything else: `wrong_recipient` (not Paygate's money).
   */
  private async sessionPaidBy(
    trx: CheckoutTrx,
    data: Observed,
    amountMicro: bigint,
  ): Promise<{ session?: SessionRow; unmatchedReason: string | null }> {
    const to = data.to.toLowerCase();
    const byAddress = await trx
      .selectFrom('sessions')
      .selectAll()
      .where('deposit_address', '=', to)
      .forUpdate()
      .executeTakeFirst();
    if (byAddress) return { session: byAddress, unmatchedReason: null };
    if (to === this.config.escrowAddress.toLowerCase()) return { unmatchedReason: 'paid_to_agent_escrow' };
    if (to !== this.config.checkoutEscrowAddress.toLowerCase()) return { unmatchedReason: 'wrong_recipient' };
    const legacy = await trx
      .selectFrom('sessions')
      .selectAll()
      .where('amount_reserved', '=', true)
      .where('deposit_address', 'is', null)
      .where('exact_amount_micro', '=', amountMicro)
      .forUpdate()
      .executeTakeFirst();
    return legacy
      ? { session: legacy, unmatchedReason: null }
      : { unmatchedReason: 'no_session_with_this_amount' };
  }

  /** Records the transfer on the session; every outcome but underpaid is a payment (payment.confirmed). */
  async applyToSession(
    trx: CheckoutTrx,
    session: SessionRow,
    transfer: TransferRow,
    outcome: SessionStatus,
  ): Promise<SessionRow> {
    const now = this.config.now();
    const updated = await trx
      .updateTable('sessions')
      .set({
        status: outcome,
        paid_amount_micro: transfer.amount_micro,
        transfer_id: transfer.transfer_id,
        tx_hash: transfer.tx_hash,
        payer: transfer.from_address,
        paid_at: now,
        updated_at: now,
      })
      .where('session_id', '=', session.session_id)
      .returningAll()
      .executeTakeFirstOrThrow();
    if (outcome === 'underpaid') {
      await enqueueSessionEvent(trx, 'checkout.session_underpaid', updated, this.config);
      return updated;
    }
    const paymentId = newPaymentId();
    await trx
      .insertInto('payments')
      .values({
        payment_id: paymentId,
        session_id: session.session_id,
        transfer_id: transfer.transfer_id,
        amount_micro: transfer.amount_micro,
        status: 'confirmed',
        confirmed_at: now,
        reversed_at: null,
      })
      .execute();
    await enqueueEvent(
      trx,
      createEvent(
        'payment.confirmed',
        'checkout',
        {
          paymentId,
          source: 'checkout',
          sellerId: session.seller_id,
          skillId: session.skill_id,
          skillName: session.skill_name,
          endpointId: session.endpoint_id,
          sessionId: session.session_id,
          payer: transfer.from_address,
          amount: formatUsdcExact(transfer.amount_micro),
          network: transfer.network as Observed['network'],
          chainId: transfer.chain_id,
          token: transfer.token_address,
          txHash: transfer.tx_hash,
          logIndex: transfer.log_index,
          holdPeriodHours: session.hold_period_hours,
          confirmedAt: now.toISOString(),
        },
        { trace: currentTraceCarrier() },
      ),
    );
    await enqueueSessionEvent(trx, 'checkout.session_paid', updated, this.config);
    return updated;
  }

  /**
   * The ledger recorded a claim by another channel (an x402 proof, a seller's /api/verify): the transfer is not
   * unmatched money. Remembered for a transfer not observed yet; an unmatched one becomes `claimed`. Checkout's own
   * claims (sessions, operator refunds) are already recorded by the decision that made them.
   */
  async onClaimed(trx: CheckoutTrx, data: Claimed): Promise<void> {
    if (data.channel === 'checkout' || data.channel === 'operator_refund') return;
    const txHash = data.txHash.toLowerCase();
    await lockTransferKey(trx, data.chainId, txHash, data.logIndex);
    await trx
      .insertInto('claimed_transfers')
      .values({
        chain_id: data.chainId,
        tx_hash: txHash,
        log_index: data.logIndex,
        channel: data.channel,
        claim_id: data.claimId,
        claimed_at: new Date(data.claimedAt),
      })
      .onConflict((oc) => oc.columns(['chain_id', 'tx_hash', 'log_index']).doNothing())
      .execute();
    const claimed = await trx
      .updateTable('transfers')
      .set({
        status: 'claimed',
        unmatched_reason: `claimed_by_${data.channel}`,
        updated_at: this.config.now(),
      })
      .where('chain_id', '=', data.chainId)
      .where('tx_hash', '=', txHash)
      .where('log_index', '=', data.logIndex)
      .where('status', '=', 'unmatched')
      .returning('transfer_id')
      .executeTakeFirst();
    if (claimed) {
      this.logger.info(
        { transferId: claimed.transfer_id, txHash, claimedBy: data.channel },
        'unmatched transfer claimed by another channel; off the unmatched list',
      );
    }
  }

  /** The ledger refused an operator action: a transfer another channel spent is recorded as claimed, not left unmatched. */
  private async refusal(
    trx: CheckoutTrx,
    transfer: TransferRow,
    refused: Exclude<Awaited<ReturnType<LedgerClaims['claim']>>, { ok: true }>,
  ): Promise<ClaimRefusal> {
    if (refused.reason !== 'claimed_elsewhere') {
      return { refused: { status: 409, code: refused.reason, message: refused.message }, transfer };
    }
    if (transfer.status !== 'unmatched') {
      // An underpaid session's transfer stays attached to its session: the ledger says a payment holds it.
      return {
        refused: {
          status: 409,
          code: refused.claimedBy === 'operator_refund' ? 'transfer_refunded' : 'transfer_claimed_by_payment',
          message: refused.message,
          claimedBy: refused.claimedBy,
        },
        transfer,
      };
    }
    const claimed = await trx
      .updateTable('transfers')
      .set({
        status: 'claimed',
        unmatched_reason: `claimed_by_${refused.claimedBy}`,
        updated_at: this.config.now(),
      })
      .where('transfer_id', '=', transfer.transfer_id)
      .returningAll()
      .executeTakeFirstOrThrow();
    return {
      refused: {
        status: 409,
        code: refused.claimedBy === 'operator_refund' ? 'transfer_refunded' : 'transfer_claimed_by_payment',
        message: `${refused.message}; it is not unmatched money (claimed by ${refused.claimedBy})`,
        claimedBy: refused.claimedBy,
      },
      transfer: claimed,
    };
  }

  /** A transfer left the canonical chain: reverse its payment and reopen its session. */
  async onReorged(trx: CheckoutTrx, data: Reorged): Promise<void> {
    const now = this.config.now();
    const transfer = await trx
      .selectFrom('transfers')
      .selectAll()
      .where('chain_id', '=', data.chainId)
      .where('tx_hash', '=', data.txHash.toLowerCase())
      .where('log_index', '=', data.logIndex)
      .forUpdate()
      .executeTakeFirst();
    // Unknown, already reorged, or since re-observed in another block: nothing of ours stands on that block.
    if (!transfer || transfer.status === 'reorged') return;
    if (transfer.block_hash !== data.blockHash.toLowerCase()) return;
    await trx
      .updateTable('transfers')
      .set({ status: 'reorged', session_id: null, updated_at: now })
      .where('transfer_id', '=', transfer.transfer_id)
      .execute();
    if (!transfer.session_id) return;
    const session = await trx
      .selectFrom('sessions')
      .selectAll()
      .where('session_id', '=', transfer.session_id)
      .forUpdate()
      .executeTakeFirstOrThrow();
    if (session.transfer_id !== transfer.transfer_id) return;
    // A refunded session took no payment and its transfer is on its way back: nothing to reopen.
    if (session.status === 'refunded') return;
    const payment = await trx
      .updateTable('payments')
      .set({ status: 'reversed', reversed_at: now })
      .where('transfer_id', '=', transfer.transfer_id)
      .where('status', '=', 'confirmed')
      .returningAll()
      .executeTakeFirst();
    const reopened = await trx
      .updateTable('sessions')
      .set({
        status: now < session.expires_at ? 'open' : 'expired',
        paid_amount_micro: null,
        transfer_id: null,
        tx_hash: null,
        payer: null,
        paid_at: null,
        // The amount stayed reserved until late_until, so it is still this session's alone.
        updated_at: now,
      })
      .where('session_id', '=', session.session_id)
      .returningAll()
      .executeTakeFirstOrThrow();
    if (payment) {
      await enqueueEvent(
        trx,
        createEvent(
          'payment.reversed',
          'checkout',
          {
            paymentId: payment.payment_id,
            source: 'checkout',
            sellerId: session.seller_id,
            sessionId: session.session_id,
            chainId: transfer.chain_id,
            txHash: transfer.tx_hash,
            logIndex: transfer.log_index,
            amount: formatUsdcExact(payment.amount_micro),
            reason: `transfer reorged out of block ${data.blockNumber} (${data.blockHash})`,
            reversedAt: now.toISOString(),
          },
          { trace: currentTraceCarrier() },
        ),
      );
    }
    await enqueueSessionEvent(trx, 'checkout.session_reopened', reopened, this.config);
  }

  /** Operator: apply an unmatched transfer to a session (paid, paid_late, underpaid or overpaid by amount). */
  async attach(trx: CheckoutTrx, transferId: string, sessionId: string, note: string | null) {
    const transfer = await trx
      .selectFrom('transfers')
      .selectAll()
      .where('transfer_id', '=', transferId)
      .forUpdate()
      .executeTakeFirst();
    if (!transfer) throw new HttpError(404, 'not_found', 'transfer not found');
    if (transfer.status !== 'unmatched') {
      throw new HttpError(409, 'transfer_not_unmatched', `transfer is ${transfer.status}, not unmatched`);
    }
    const session = await trx
      .selectFrom('sessions')
      .selectAll()
      .where('session_id', '=', sessionId)
      .forUpdate()
      .executeTakeFirst();
    if (!session) {
      throw new HttpError(404, 'not_found', 'session not found', { field: 'sessionId', rule: 'must exist' });
    }
    if (session.transfer_id !== null) {
      throw new HttpError(409, 'session_already_paid', `session is ${session.status} by another transfer`, {
        field: 'sessionId',
        rule: 'must not have a transfer already',
      });
    }
    const claim = await this.claims.claim(transfer, 'checkout', sessionId);
    if (!claim.ok) return this.refusal(trx, transfer, claim);
    const now = this.config.now();
    const attached = await trx
      .updateTable('transfers')
      .set({
        status: 'attached',
        session_id: sessionId,
        resolution_note: note,
        resolved_at: now,
        updated_at: now,
      })
      .where('transfer_id', '=', transferId)
      .returningAll()
      .executeTakeFirstOrThrow();
    const outcome = outcomeFor(session, transfer.amount_micro, now);
    const updated = await this.applyToSession(trx, session, attached, outcome);
    return { transfer: attached, session: updated };
  }

  /**
   * Operator: send a transfer that paid for nothing back to its sender: an unmatched transfer, or the short
   * transfer attached to an `underpaid` session (the session becomes `refunded`, `checkout.session_refunded`).
   * The status change and `transfer.refund_requested` (outbox) commit together, once per transfer: only an
   * `unmatched` row (or the `attached` row of an `underpaid` session) is updated under a row lock, so a second
   * mark is a 409 and publishes nothing. The ledger books the refund out of suspense and settlement sends it. A
   * transfer that is not USDC into this escrow wallet on this chain is not on the ledger's books and cannot be
   * refunded here; the transfer of a paid or overpaid session is a payment (refund that payment instead).
   */
  async markForRefund(trx: CheckoutTrx, transferId: string, note: string | null) {
    const now = this.config.now();
    const transfer = await trx
      .selectFrom('transfers')
      .selectAll()
      .where('transfer_id', '=', transferId)
      .forUpdate()
      .executeTakeFirst();
    if (!transfer) throw new HttpError(404, 'not_found', 'transfer not found');
    const session = await this.underpaidSessionOf(trx, transfer);
    if (transfer.status !== 'unmatched' && !session) {
      const paid =
        transfer.status === 'attached' || transfer.status === 'matched'
          ? ': it paid its session (refund the payment with POST /api/v1/refunds)'
          : '';
      throw new HttpError(
        409,
        'transfer_not_unmatched',
        `transfer is ${transfer.status}, not unmatched nor the transfer of an underpaid session${paid}`,
      );
    }
    if (transfer.unmatched_reason && NOT_IN_ESCROW_REASONS.has(transfer.unmatched_reason)) {
      throw new HttpError(
        409,
        'transfer_not_refundable',
        `transfer is ${transfer.unmatched_reason}: it is not USDC in this escrow wallet, so it cannot be refunded from escrow`,
      );
    }
    // Decided now by the owner of the money: a transfer a payment claimed meanwhile is refused (409), not
    // marked and then dropped by the ledger. An underpaid session's transfer is held by checkout's claim for
    // that session, which paid for nothing: the ledger lets the refund take it over unless a payment is booked.
    const claim = await this.claims.claim(
      transfer,
      'operator_refund',
      transfer.transfer_id,
      session?.session_id,
    );
    if (!claim.ok) return this.refusal(trx, transfer, claim);
    const refundRequestId = newRefundRequestId();
    const updated = await trx
      .updateTable('transfers')
      .set({
        status: 'refund_requested',
        refund_request_id: refundRequestId,
        resolution_note: note,
        resolved_at: now,
        updated_at: now,
      })
      .where('transfer_id', '=', transferId)
      .where('status', '=', transfer.status)
      .returningAll()
      .executeTakeFirstOrThrow();
    await enqueueEvent(
      trx,
      createEvent(
        'transfer.refund_requested',
        'checkout',
        {
          refundRequestId,
          transferId: updated.transfer_id,
          chainId: updated.chain_id,
          txHash: updated.tx_hash,
          logIndex: updated.log_index,
          from: updated.from_address,
          amount: formatUsdcExact(updated.amount_micro),
          reason:
            note ??
            (session
              ? `underpayment of session ${session.session_id} returned to sender`
              : `unmatched transfer (${updated.unmatched_reason ?? 'no reason'}) returned to sender`),
          ...(session ? { sessionId: session.session_id } : {}),
          requestedAt: now.toISOString(),
        },
        { trace: currentTraceCarrier() },
      ),
    );
    let refundedSession: SessionRow | undefined;
    if (session) {
      // The session took no payment and never will: its amount is free for another session.
      refundedSession = await trx
        .updateTable('sessions')
        .set({ status: 'refunded', amount_reserved: false, updated_at: now })
        .where('session_id', '=', session.session_id)
        .returningAll()
        .executeTakeFirstOrThrow();
      await enqueueSessionEvent(trx, 'checkout.session_refunded', refundedSession, this.config);
    }
    this.logger.info(
      {
        transferId,
        refundRequestId,
        sessionId: session?.session_id,
        txHash: updated.tx_hash,
        amount: formatUsdcExact(updated.amount_micro),
      },
      session ? 'underpaid session transfer marked for refund' : 'unmatched transfer marked for refund',
    );
    return { transfer: updated, session: refundedSession };
  }

  /** The `underpaid` session a transfer (matched at its address, or attached) is the short payment of, locked. */
  private async underpaidSessionOf(trx: CheckoutTrx, transfer: TransferRow): Promise<SessionRow | undefined> {
    if ((transfer.status !== 'attached' && transfer.status !== 'matched') || !transfer.session_id)
      return undefined;
    const session = await trx
      .selectFrom('sessions')
      .selectAll()
      .where('session_id', '=', transfer.session_id)
      .forUpdate()
      .executeTakeFirst();
    return session?.status === 'underpaid' && session.transfer_id === transfer.transfer_id
      ? session
      : undefined;
  }
}

/** Unmatched reasons for money that is not USDC in this escrow wallet on this chain (the ledger never booked it). */
const NOT_IN_ESCROW_REASONS = new Set(['wrong_token', 'wrong_recipient', 'wrong_chain']);

export function toTransferView(row: TransferRow) {
  return {
    transferId: row.transfer_id,
    status: row.status,
    reason: row.unmatched_reason,
    candidateSessionId: row.candidate_session_id,
    sessionId: row.session_id,
    chainId: row.chain_id,
    network: row.network,
    txHash: row.tx_hash,
    logIndex: row.log_index,
    blockNumber: Number(row.block_number),
    from: row.from_address,
    to: row.to_address,
    token: row.token_address,
    amount: formatUsdcExact(row.amount_micro),
    note: row.resolution_note,
    refundRequestId: row.refund_request_id ?? null,
    observedAt: row.observed_at.toISOString(),
    resolvedAt: row.resolved_at?.toISOString() ?? null,
  };
}
