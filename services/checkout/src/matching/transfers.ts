import type { EventData } from '@paygate/contracts';
import type { Logger } from '@paygate/telemetry';
import type { CheckoutConfig } from '../config';
import type { CheckoutTrx } from '../db';
import type { LedgerClaims } from './claims';
import { observeTransfer, recordClaimedElsewhere } from './observe';
import { attachTransfer, markTransferForRefund } from './operator';
import { type MatchingDeps, reverseReorgedTransfer } from './session-payments';

/**
 * Turns confirmed transfers into session payments. A transfer to a session's own deposit address pays that
 * session: exactly its amount `paid` (`paid_late` after expiry), more `overpaid` (a payment of what was received),
 * less `underpaid` (no payment; an operator returns it). The first transfer to an address decides; a later one is
 * kept as unmatched (`session_already_paid`) for an operator, like anything that pays no session.
 * The ledger books each session's payment with checkout's claim of its transfer (and publishes payment.confirmed);
 * checkout records it once per applied transfer (unique indexes on payments), and a reorg reverses it.
 * Matching a transfer is observe.ts, what a session's payment does session-payments.ts, operator actions operator.ts.
 */
export class TransferMatcher {
  private readonly deps: MatchingDeps;

  constructor(config: CheckoutConfig, logger: Logger, claims: LedgerClaims) {
    this.deps = { config, logger, claims };
  }

  onObserved(trx: CheckoutTrx, data: EventData<'transfer.observed'>): Promise<void> {
    return observeTransfer(this.deps, trx, data);
  }

  /** The ledger recorded a claim through another payment path: the transfer is not unmatched money. */
  onClaimed(trx: CheckoutTrx, data: EventData<'transfer.claimed'>): Promise<void> {
    return recordClaimedElsewhere(this.deps, trx, data);
  }

  /** A transfer left the canonical chain: reverse its payment and reopen its session. */
  onReorged(trx: CheckoutTrx, data: EventData<'transfer.reorged'>, eventId: string): Promise<void> {
    return reverseReorgedTransfer(this.deps, trx, data, eventId);
  }

  /** Operator: apply an unmatched transfer to a session (paid, paid_late, underpaid or overpaid by amount). */
  attach(trx: CheckoutTrx, transferId: string, sessionId: string, note: string | null) {
    return attachTransfer(this.deps, trx, transferId, sessionId, note);
  }

  /** Operator: send a transfer that paid for nothing back to its sender (see markTransferForRefund). */
  markForRefund(trx: CheckoutTrx, transferId: string, note: string | null) {
    return markTransferForRefund(this.deps, trx, transferId, note);
  }
}
