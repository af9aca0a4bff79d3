import { randomBytes } from 'node:crypto';
import { takeReorgTombstone } from '@paygate/bus';
import type { EventData } from '@paygate/contracts';
import { parseChainUsdc } from '@paygate/money';
import type { CheckoutTrx, SessionRow, TransferRow } from '../db';
import { CheckoutInvariantError } from '../errors';
import { applyToSession, type MatchingDeps, outcomeFor, sessionPaymentOf } from './session-payments';
import { lockTransferAt, lockTransferKey } from './transfer-rows';

type Observed = EventData<'transfer.observed'>;

const newTransferId = () => `tr_${randomBytes(12).toString('hex')}`;

/** What an observed transfer is to checkout: the session it pays, or why it pays none. */
interface MatchDecision {
  session: SessionRow | undefined;
  unmatchedReason: string | null;
  candidate: string | null;
  claimedBy: string | null;
  /** The payment the ledger booked with the session's claim (none for an underpaid session). */
  paymentId: string | undefined;
}

/**
 * A confirmed transfer: recorded and applied to the session it pays (paid, paid_late, overpaid or underpaid by
 * amount). A re-publish changes nothing; a reorged one observed again is decided anew.
 */
export async function observeTransfer(deps: MatchingDeps, trx: CheckoutTrx, data: Observed): Promise<void> {
  const now = deps.config.now();
  // Read from the chain: booked whatever its size (not the cap on typed amounts).
  const amountMicro = parseChainUsdc(data.amount);
  await lockTransferKey(trx, data.chainId, data.txHash, data.logIndex);
  if (await takeReorgTombstone(trx, data)) {
    deps.logger.warn(
      { txHash: data.txHash, logIndex: data.logIndex, blockHash: data.blockHash },
      'transfer.observed of a block whose transfer.reorged was handled first; not applied',
    );
    return;
  }
  const existing = await lockTransferAt(trx, data);
  if (existing && existing.status !== 'reorged') {
    // Already applied (a re-publish by the indexer), or mined again in another block before the reorg of its old
    // block reached us: it stands on the new block now, so that reorg, when it comes, reverses nothing.
    if (existing.block_hash !== data.blockHash.toLowerCase()) {
      await trx
        .updateTable('transfers')
        .set({
          block_hash: data.blockHash.toLowerCase(),
          block_number: BigInt(data.blockNumber),
          updated_at: now,
        })
        .where('transfer_id', '=', existing.transfer_id)
        .execute();
    }
    return;
  }
  // The agent escrow is where 402 payments go: never a session's, so not checkout's to list (the ledger books
  // it and an x402 proof or /api/verify claims it). Only when the transfer is new: one recorded before stays.
  if (!existing && data.to.toLowerCase() === deps.config.escrowAddress.toLowerCase()) {
    deps.logger.debug(
      { txHash: data.txHash, logIndex: data.logIndex },
      'transfer to the agent escrow; not checkout’s',
    );
    return;
  }
  const decision = await decideMatch(deps, trx, data, amountMicro, now);
  const transfer = await saveObservedTransfer(trx, data, existing, decision, amountMicro, now);
  const { session, claimedBy, candidate, unmatchedReason, paymentId } = decision;
  if (session)
    await applyToSession(deps, trx, session, transfer, outcomeFor(session, amountMicro, now), paymentId);
  else if (claimedBy)
    deps.logger.info(
      { txHash: data.txHash, logIndex: data.logIndex, claimedBy, candidateSessionId: candidate },
      'transfer already claimed through another payment path; not unmatched',
    );
  else
    deps.logger.warn(
      { txHash: data.txHash, logIndex: data.logIndex, amount: data.amount, reason: unmatchedReason },
      'transfer matches no session; kept as unmatched',
    );
}

const unmatched = (unmatchedReason: string | null, candidate: string | null = null): MatchDecision => ({
  session: undefined,
  unmatchedReason,
  candidate,
  claimedBy: null,
  paymentId: undefined,
});

/**
 * The session the transfer pays, if it may: not past its late window, not paid by another transfer, and the
 * transfer claimed for it at the ledger. Otherwise the session is only the candidate and the reason is kept.
 */
async function decideMatch(
  deps: MatchingDeps,
  trx: CheckoutTrx,
  data: Observed,
  amountMicro: bigint,
  now: Date,
): Promise<MatchDecision> {
  const { session, unmatchedReason } = await sessionPaidBy(deps, trx, data, amountMicro);
  if (!session) return unmatched(unmatchedReason);
  if (session.late_until <= now) return unmatched('late_window_passed', session.session_id);
  if (session.transfer_id !== null) return unmatched('session_already_paid', session.session_id);
  // A session's payment first claims the transfer at the ledger, which books it: a transfer an x402 call (or
  // anything else) already spent leaves the session open and is recorded as claimed elsewhere, never paid twice.
  const payment = sessionPaymentOf(
    session,
    { network: data.network, token_address: data.token },
    outcomeFor(session, amountMicro, now),
  );
  const claim = await deps.claims.claim(
    {
      chain_id: data.chainId,
      tx_hash: data.txHash.toLowerCase(),
      log_index: data.logIndex,
      from_address: data.from,
      amount_micro: amountMicro,
    },
    'checkout',
    session.session_id,
    { payment },
  );
  if (claim.ok) {
    const paymentId = claim.paymentId ?? payment?.paymentId;
    return { session, unmatchedReason: null, candidate: null, claimedBy: null, paymentId };
  }
  if (claim.reason !== 'claimed_elsewhere')
    throw new CheckoutInvariantError(`unexpected claim refusal: ${claim.message}`);
  return { ...unmatched(`claimed_by_${claim.claimedBy}`, session.session_id), claimedBy: claim.claimedBy };
}

/** The transfer row as decided: a new one, or the reorged one observed again, updated in place. */
async function saveObservedTransfer(
  trx: CheckoutTrx,
  data: Observed,
  existing: TransferRow | undefined,
  decision: MatchDecision,
  amountMicro: bigint,
  now: Date,
): Promise<TransferRow> {
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
    status: decision.session ? 'matched' : decision.claimedBy ? 'claimed' : 'unmatched',
    unmatched_reason: decision.unmatchedReason,
    candidate_session_id: decision.candidate,
    session_id: decision.session?.session_id ?? null,
    resolution_note: null,
    resolved_at: null,
  } as const;
  if (existing) {
    return trx
      .updateTable('transfers')
      .set(fields)
      .where('transfer_id', '=', existing.transfer_id)
      .returningAll()
      .executeTakeFirstOrThrow();
  }
  return trx
    .insertInto('transfers')
    .values({ ...fields, transfer_id: newTransferId() })
    .returningAll()
    .executeTakeFirstOrThrow();
}

/**
 * The session a transfer pays, locked: by deposit address whatever the amount, else by unique exact amount at the
 * checkout wallet. Never at the agent escrow, so a session can never capture an agent's payment.
 */
async function sessionPaidBy(
  deps: MatchingDeps,
  trx: CheckoutTrx,
  data: Observed,
  amountMicro: bigint,
): Promise<{ session?: SessionRow; unmatchedReason: string | null }> {
  // Money that is not USDC on this chain (the ledger never booked it).
  if (data.chainId !== deps.config.chainId) return { unmatchedReason: 'wrong_chain' };
  if (data.token.toLowerCase() !== deps.config.usdcAddress.toLowerCase())
    return { unmatchedReason: 'wrong_token' };
  const to = data.to.toLowerCase();
  const byAddress = await trx
    .selectFrom('sessions')
    .selectAll()
    .where('deposit_address', '=', to)
    .forUpdate()
    .executeTakeFirst();
  if (byAddress) return { session: byAddress, unmatchedReason: null };
  if (to === deps.config.escrowAddress.toLowerCase()) return { unmatchedReason: 'paid_to_agent_escrow' };
  if (to !== deps.config.checkoutEscrowAddress.toLowerCase()) return { unmatchedReason: 'wrong_recipient' };
  const byAmount = await trx
    .selectFrom('sessions')
    .selectAll()
    .where('amount_reserved', '=', true)
    .where('exact_amount_micro', '=', amountMicro)
    .forUpdate()
    .executeTakeFirst();
  return byAmount
    ? { session: byAmount, unmatchedReason: null }
    : { unmatchedReason: 'no_session_with_this_amount' };
}
