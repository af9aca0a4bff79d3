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

interface SubjectDefinition {
  owners: readonly ServiceName[];
  version: number;
  schema: TSchema;
  description: string;
}

/** Every event subject on the bus: `<entity>.<past-tense verb>`, who may publish it, and its payload schema. */
export const SUBJECTS = {
  'transfer.observed': {
    owners: ['chain-indexer'],
    version: 1,
    schema: TransferObserved,
    description:
      'A USDC transfer into the escrow wallet, the checkout deposit wallet or a session deposit address (`to` names it) reached the required confirmations.',
  },
  'transfer.reorged': {
    owners: ['chain-indexer'],
    version: 1,
    schema: TransferReorged,
    description: 'An observed transfer left the canonical chain.',
  },
  'transfer.refund_requested': {
    owners: ['checkout'],
    version: 1,
    schema: TransferRefundRequested,
    description:
      'An operator decided that a transfer which matched no session goes back to its sender; the ledger books it.',
  },
  'skill.updated': {
    owners: ['registry'],
    version: 1,
    schema: SkillUpdated,
    description: 'A skill or one of its endpoints changed; carries the full serving snapshot.',
  },
  'seller.updated': {
    owners: ['registry'],
    version: 1,
    schema: SellerUpdated,
    description: 'A seller account or its settings changed (keys, webhook, payout, settlement).',
  },
  'seller.payout_address_change_requested': {
    owners: ['registry'],
    version: 1,
    schema: PayoutAddressChangeRequested,
    description:
      'The account wallet signed a new payout address; it takes effect at effectiveAt (announced to the seller by webhook).',
  },
  'payment.confirmed': {
    owners: ['escrow-ledger'],
    version: 1,
    schema: PaymentConfirmed,
    description:
      'The ledger booked a payment for a seller (x402 proof or checkout match), in the transaction of its ledger.claim_transfer: a fact for the notifier and the live channel.',
  },
  'payment.reversed': {
    owners: ['gateway-proxy', 'checkout'],
    version: 1,
    schema: PaymentReversed,
    description: 'A confirmed payment no longer stands (its transfer was reorged away).',
  },
  'payment.call_failed': {
    owners: ['gateway-proxy'],
    version: 1,
    schema: PaymentCallFailed,
    description:
      "A paid call's forward to the seller failed (5xx, timeout, unreachable): the buyer may retry with the same payment until retryUntil.",
  },
  'payment.call_recovered': {
    owners: ['gateway-proxy'],
    version: 1,
    schema: PaymentCallRecovered,
    description: 'A paid call that failed before was served on a retry within its window.',
  },
  'payment.call_unserved': {
    owners: ['gateway-proxy'],
    version: 1,
    schema: PaymentCallUnserved,
    description:
      "A paid call's seller failed it and its retry window closed with no attempt served: the ledger refunds it.",
  },
  'payment.refunded': {
    owners: ['escrow-ledger'],
    version: 1,
    schema: PaymentRefunded,
    description:
      'The ledger refunded a paid call its seller did not serve (no seller approval); the seller hears of it by webhook.',
  },
  'checkout.session_created': {
    owners: ['checkout'],
    version: 1,
    schema: CheckoutSessionSnapshot,
    description: 'A checkout session was opened.',
  },
  'checkout.session_paid': {
    owners: ['checkout'],
    version: 1,
    schema: CheckoutSessionSnapshot,
    description: 'A checkout session was paid (status paid, paid_late or overpaid).',
  },
  'checkout.session_underpaid': {
    owners: ['checkout'],
    version: 1,
    schema: CheckoutSessionSnapshot,
    description: 'A transfer matched a session but was less than its exact amount.',
  },
  'checkout.session_expired': {
    owners: ['checkout'],
    version: 1,
    schema: CheckoutSessionSnapshot,
    description: 'A checkout session passed its expiry without payment.',
  },
  'checkout.session_reopened': {
    owners: ['checkout'],
    version: 1,
    schema: CheckoutSessionSnapshot,
    description: 'The payment of a session was reorged away; the session is open (or expired) again.',
  },
  'checkout.session_refunded': {
    owners: ['checkout'],
    version: 1,
    schema: CheckoutSessionSnapshot,
    description:
      'An operator sent the transfer of an underpaid session back to its payer (status refunded; no payment was made).',
  },
  'deposit.address_assigned': {
    owners: ['checkout'],
    version: 1,
    schema: DepositAddressAssigned,
    description:
      "A checkout session got its own deposit address (an HD child of checkout's xpub); the indexer watches it, settlement sweeps it.",
  },
  'refund.requested': {
    owners: ['escrow-ledger'],
    version: 1,
    schema: RefundRequested,
    description: 'A buyer asked for a refund; the merchant must approve or reject it.',
  },
  'refund.approved': {
    owners: ['escrow-ledger'],
    version: 1,
    schema: RefundApproved,
    description: 'A merchant approved a buyer refund request.',
  },
  'refund.initiated': {
    owners: ['escrow-ledger'],
    version: 1,
    schema: RefundInitiated,
    description: 'The ledger booked a refund; settlement sends the USDC back to the payer.',
  },
  'refund.completed': {
    owners: ['settlement'],
    version: 1,
    schema: RefundCompleted,
    description: 'A refund transfer was confirmed on chain.',
  },
  'escrow.released': {
    owners: ['escrow-ledger'],
    version: 1,
    schema: EscrowReleased,
    description: 'A held payment passed its hold period and became available to the seller.',
  },
  'settlement.due': {
    owners: ['settlement'],
    version: 1,
    schema: SettlementDue,
    description:
      "A seller's settlement period is due (or an operator settles it now): the ledger decides its payout.",
  },
  'revenue.payout_requested': {
    owners: ['settlement'],
    version: 1,
    schema: PlatformPayoutRequested,
    description:
      "An operator asked for the platform's revenue to be paid to the treasury: the ledger decides it.",
  },
  'payout.reserved': {
    owners: ['escrow-ledger'],
    version: 1,
    schema: PayoutReserved,
    description:
      'The ledger reserved a payout (seller or platform) in its own transaction; settlement sends exactly it, once.',
  },
  'payout.refused': {
    owners: ['escrow-ledger'],
    version: 1,
    schema: PayoutRefused,
    description: 'The ledger reserved nothing for a due payout (below the minimum, or nothing available).',
  },
  'payout.failed': {
    owners: ['settlement'],
    version: 1,
    schema: PayoutFailed,
    description:
      'A reserved payout was never sent (pre-flight, transfer cap) or reverted; the ledger gives the reservation back.',
  },
  'settlement.completed': {
    owners: ['settlement'],
    version: 1,
    schema: SettlementCompleted,
    description: 'A payout to a seller was confirmed on chain.',
  },
  'revenue.paid_out': {
    owners: ['settlement'],
    version: 1,
    schema: PlatformPayoutCompleted,
    description: "A payout of the platform's revenue to the treasury address was confirmed on chain.",
  },
} as const satisfies Record<string, SubjectDefinition>;

export type Subject = keyof typeof SUBJECTS;
export type EventData<S extends Subject> = Static<(typeof SUBJECTS)[S]['schema']>;
export const ALL_SUBJECTS = Object.keys(SUBJECTS) as Subject[];

export function isSubject(value: string): value is Subject {
  return Object.hasOwn(SUBJECTS, value);
}
