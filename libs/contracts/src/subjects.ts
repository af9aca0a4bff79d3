import type { Static, TSchema } from '@sinclair/typebox';
import { TransferObserved, TransferReorged } from './events/chain-indexer';
import { CheckoutSessionSnapshot, DepositAddressAssigned, TransferRefundRequested } from './events/checkout';
import {
  EscrowReleased,
  PaymentRefunded,
  RefundApproved,
  RefundInitiated,
  RefundRequested,
} from './events/escrow-ledger';
import {
  PaymentCallFailed,
  PaymentCallRecovered,
  PaymentCallUnserved,
  PaymentConfirmed,
  PaymentReversed,
} from './events/payments';
import {
  PayoutFailed,
  PayoutRefused,
  PayoutReserved,
  PlatformPayoutRequested,
  SettlementDue,
} from './events/payouts';
import { PayoutAddressChangeRequested, SellerUpdated, SkillUpdated } from './events/registry';
import { PlatformPayoutCompleted, RefundCompleted, SettlementCompleted } from './events/settlement';

export type ServiceName =
  | 'gateway-proxy'
  | 'registry'
  | 'checkout'
  | 'chain-indexer'
  | 'escrow-ledger'
  | 'settlement'
  | 'notifier';

/** A subject: who may publish it, its envelope version and its payload schema. */
const event = <const O extends readonly ServiceName[], S extends TSchema>(
  owners: O,
  schema: S,
  description: string,
) => ({ owners, version: 1, schema, description });

/** Every event subject on the bus: `<entity>.<past-tense verb>`, who may publish it, and its payload schema. */
export const SUBJECTS = {
  'transfer.observed': event(
    ['chain-indexer'],
    TransferObserved,
    'A USDC transfer into the escrow wallet, the checkout deposit wallet or a session deposit address (`to` names it) reached the required confirmations.',
  ),
  'transfer.reorged': event(
    ['chain-indexer'],
    TransferReorged,
    'An observed transfer left the canonical chain.',
  ),
  'transfer.refund_requested': event(
    ['checkout'],
    TransferRefundRequested,
    'An operator decided that a transfer which matched no session goes back to its sender; the ledger books it.',
  ),
  'skill.updated': event(
    ['registry'],
    SkillUpdated,
    'A skill or one of its endpoints changed; carries the full serving snapshot.',
  ),
  'seller.updated': event(
    ['registry'],
    SellerUpdated,
    'A seller account or its settings changed (keys, webhook, payout, settlement).',
  ),
  'seller.payout_address_change_requested': event(
    ['registry'],
    PayoutAddressChangeRequested,
    'The account wallet signed a new payout address; it takes effect at effectiveAt (announced to the seller by webhook).',
  ),
  'payment.confirmed': event(
    ['escrow-ledger'],
    PaymentConfirmed,
    'The ledger booked a payment for a seller (x402 proof or checkout match), in the transaction of its ledger.claim_transfer: a fact for the notifier and the live channel.',
  ),
  'payment.reversed': event(
    ['gateway-proxy', 'checkout'],
    PaymentReversed,
    'A confirmed payment no longer stands (its transfer was reorged away).',
  ),
  'payment.call_failed': event(
    ['gateway-proxy'],
    PaymentCallFailed,
    "A paid call's forward to the seller failed (5xx, timeout, unreachable): the buyer may retry with the same payment until retryUntil.",
  ),
  'payment.call_recovered': event(
    ['gateway-proxy'],
    PaymentCallRecovered,
    'A paid call that failed before was served on a retry within its window.',
  ),
  'payment.call_unserved': event(
    ['gateway-proxy'],
    PaymentCallUnserved,
    "A paid call's seller failed it and its retry window closed with no attempt served: the ledger refunds it.",
  ),
  'payment.refunded': event(
    ['escrow-ledger'],
    PaymentRefunded,
    'The ledger refunded a paid call its seller did not serve (no seller approval); the seller hears of it by webhook.',
  ),
  'checkout.session_created': event(['checkout'], CheckoutSessionSnapshot, 'A checkout session was opened.'),
  'checkout.session_paid': event(
    ['checkout'],
    CheckoutSessionSnapshot,
    'A checkout session was paid (status paid, paid_late or overpaid).',
  ),
  'checkout.session_underpaid': event(
    ['checkout'],
    CheckoutSessionSnapshot,
    'A transfer matched a session but was less than its exact amount.',
  ),
  'checkout.session_expired': event(
    ['checkout'],
    CheckoutSessionSnapshot,
    'A checkout session passed its expiry without payment.',
  ),
  'checkout.session_reopened': event(
    ['checkout'],
    CheckoutSessionSnapshot,
    'The payment of a session was reorged away; the session is open (or expired) again.',
  ),
  'checkout.session_refunded': event(
    ['checkout'],
    CheckoutSessionSnapshot,
    'An operator sent the transfer of an underpaid session back to its payer (status refunded; no payment was made).',
  ),
  'deposit.address_assigned': event(
    ['checkout'],
    DepositAddressAssigned,
    "A checkout session got its own deposit address (an HD child of checkout's xpub); the indexer watches it, settlement sweeps it.",
  ),
  'refund.requested': event(
    ['escrow-ledger'],
    RefundRequested,
    'A buyer asked for a refund; the merchant must approve or reject it.',
  ),
  'refund.approved': event(['escrow-ledger'], RefundApproved, 'A merchant approved a buyer refund request.'),
  'refund.initiated': event(
    ['escrow-ledger'],
    RefundInitiated,
    'The ledger booked a refund; settlement sends the USDC back to the payer.',
  ),
  'refund.completed': event(['settlement'], RefundCompleted, 'A refund transfer was confirmed on chain.'),
  'escrow.released': event(
    ['escrow-ledger'],
    EscrowReleased,
    'A held payment passed its hold period and became available to the seller.',
  ),
  'settlement.due': event(
    ['settlement'],
    SettlementDue,
    "A seller's settlement period is due (or an operator settles it now): the ledger decides its payout.",
  ),
  'revenue.payout_requested': event(
    ['settlement'],
    PlatformPayoutRequested,
    "An operator asked for the platform's revenue to be paid to the treasury: the ledger decides it.",
  ),
  'payout.reserved': event(
    ['escrow-ledger'],
    PayoutReserved,
    'The ledger reserved a payout (seller or platform) in its own transaction; settlement sends exactly it, once.',
  ),
  'payout.refused': event(
    ['escrow-ledger'],
    PayoutRefused,
    'The ledger reserved nothing for a due payout (below the minimum, or nothing available).',
  ),
  'payout.failed': event(
    ['settlement'],
    PayoutFailed,
    'A reserved payout was never sent (pre-flight, transfer cap) or reverted; the ledger gives the reservation back.',
  ),
  'settlement.completed': event(
    ['settlement'],
    SettlementCompleted,
    'A payout to a seller was confirmed on chain.',
  ),
  'revenue.paid_out': event(
    ['settlement'],
    PlatformPayoutCompleted,
    "A payout of the platform's revenue to the treasury address was confirmed on chain.",
  ),
};

export type Subject = keyof typeof SUBJECTS;
export type EventData<S extends Subject> = Static<(typeof SUBJECTS)[S]['schema']>;
export const ALL_SUBJECTS = Object.keys(SUBJECTS) as Subject[];

export function isSubject(value: string): value is Subject {
  return Object.hasOwn(SUBJECTS, value);
}
