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
const event = <const O extends readonly ServiceName[], S extends TSchema>(owners: O, schema: S) => ({
  owners,
  version: 1,
  schema,
});

/** Every event subject on the bus: `<entity>.<past-tense verb>`, who may publish it, and its payload schema. */
export const SUBJECTS = {
  /** A USDC transfer into a Paygate wallet or deposit address (`to` names it) reached its confirmations. */
  'transfer.observed': event(['chain-indexer'], TransferObserved),
  /** An observed transfer left the canonical chain. */
  'transfer.reorged': event(['chain-indexer'], TransferReorged),
  /** An operator sends a transfer that matched no session back to its sender; the ledger books it. */
  'transfer.refund_requested': event(['checkout'], TransferRefundRequested),
  /** A skill or one of its endpoints changed; carries the full serving snapshot. */
  'skill.updated': event(['registry'], SkillUpdated),
  /** A seller account or its settings changed (keys, webhook, payout, settlement). */
  'seller.updated': event(['registry'], SellerUpdated),
  /** The account wallet signed a new payout address, used from effectiveAt (the seller hears by webhook). */
  'seller.payout_address_change_requested': event(['registry'], PayoutAddressChangeRequested),
  /** The ledger booked a payment in its ledger.claim_transfer: a fact for the notifier and live channel. */
  'payment.confirmed': event(['escrow-ledger'], PaymentConfirmed),
  /** A confirmed payment no longer stands (its transfer was reorged away). */
  'payment.reversed': event(['gateway-proxy', 'checkout'], PaymentReversed),
  /** A paid call's forward failed (5xx, timeout, unreachable): the same payment may retry till retryUntil. */
  'payment.call_failed': event(['gateway-proxy'], PaymentCallFailed),
  /** A paid call that failed before was served on a retry within its window. */
  'payment.call_recovered': event(['gateway-proxy'], PaymentCallRecovered),
  /** A failed paid call's retry window closed with no attempt served: the ledger refunds it. */
  'payment.call_unserved': event(['gateway-proxy'], PaymentCallUnserved),
  /** The ledger refunded a paid call its seller did not serve (no approval); the seller hears by webhook. */
  'payment.refunded': event(['escrow-ledger'], PaymentRefunded),
  /** A checkout session was opened. */
  'checkout.session_created': event(['checkout'], CheckoutSessionSnapshot),
  /** A checkout session was paid (status paid, paid_late or overpaid). */
  'checkout.session_paid': event(['checkout'], CheckoutSessionSnapshot),
  /** A transfer matched a session but was less than its exact amount. */
  'checkout.session_underpaid': event(['checkout'], CheckoutSessionSnapshot),
  /** A checkout session passed its expiry without payment. */
  'checkout.session_expired': event(['checkout'], CheckoutSessionSnapshot),
  /** The payment of a session was reorged away; the session is open (or expired) again. */
  'checkout.session_reopened': event(['checkout'], CheckoutSessionSnapshot),
  /** An operator sent an underpaid session's transfer back to its payer (status refunded; no payment). */
  'checkout.session_refunded': event(['checkout'], CheckoutSessionSnapshot),
  /** A session got its own deposit address (an HD child): the indexer watches it, settlement sweeps it. */
  'deposit.address_assigned': event(['checkout'], DepositAddressAssigned),
  /** A buyer asked for a refund; the merchant must approve or reject it. */
  'refund.requested': event(['escrow-ledger'], RefundRequested),
  /** A merchant approved a buyer refund request. */
  'refund.approved': event(['escrow-ledger'], RefundApproved),
  /** The ledger booked a refund; settlement sends the USDC back to the payer. */
  'refund.initiated': event(['escrow-ledger'], RefundInitiated),
  /** A refund transfer was confirmed on chain. */
  'refund.completed': event(['settlement'], RefundCompleted),
  /** A held payment passed its hold period and became available to the seller. */
  'escrow.released': event(['escrow-ledger'], EscrowReleased),
  /** A seller's settlement period is due (or an operator settles it now): the ledger decides its payout. */
  'settlement.due': event(['settlement'], SettlementDue),
  /** An operator asked for the platform's revenue to be paid to the treasury: the ledger decides it. */
  'revenue.payout_requested': event(['settlement'], PlatformPayoutRequested),
  /** The ledger reserved a payout (seller or platform) in its own transaction; settlement sends it once. */
  'payout.reserved': event(['escrow-ledger'], PayoutReserved),
  /** The ledger reserved nothing for a due payout (below the minimum, or nothing available). */
  'payout.refused': event(['escrow-ledger'], PayoutRefused),
  /** A reserved payout was never sent (pre-flight, transfer cap) or reverted: the ledger gives it back. */
  'payout.failed': event(['settlement'], PayoutFailed),
  /** A payout to a seller was confirmed on chain. */
  'settlement.completed': event(['settlement'], SettlementCompleted),
  /** A payout of the platform's revenue to the treasury address was confirmed on chain. */
  'revenue.paid_out': event(['settlement'], PlatformPayoutCompleted),
};

export type Subject = keyof typeof SUBJECTS;
export type EventData<S extends Subject> = Static<(typeof SUBJECTS)[S]['schema']>;
export const ALL_SUBJECTS = Object.keys(SUBJECTS) as Subject[];

export function isSubject(value: string): value is Subject {
  return Object.hasOwn(SUBJECTS, value);
}
