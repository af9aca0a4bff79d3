import type { ServiceName, Subject } from './subjects';

// NATS permissions are generated from these, SUBJECTS and RPCS; startService refuses an undeclared consumer.

/** Durable consumer name -> the one subject it filters on, per service. */
export const CONSUMERS = {
  registry: {},
  'gateway-proxy': { 'gateway-skill-projection': 'skill.updated' },
  checkout: {
    'checkout-skills': 'skill.updated',
    'checkout-sellers': 'seller.updated',
    'checkout-transfers': 'transfer.observed',
    'checkout-reorgs': 'transfer.reorged',
  },
  'chain-indexer': { 'indexer-deposit-addresses': 'deposit.address_assigned' },
  'escrow-ledger': {
    'ledger-payment-call-failed': 'payment.call_failed',
    'ledger-payment-call-recovered': 'payment.call_recovered',
    'ledger-payment-call-unserved': 'payment.call_unserved',
    'ledger-transfer-observed': 'transfer.observed',
    'ledger-transfer-reorged': 'transfer.reorged',
    'ledger-refund-completed': 'refund.completed',
    'ledger-transfer-refund-requested': 'transfer.refund_requested',
    'ledger-settlement-completed': 'settlement.completed',
    'ledger-platform-payout-completed': 'revenue.paid_out',
    'ledger-settlement-due': 'settlement.due',
    'ledger-platform-payout-requested': 'revenue.payout_requested',
    'ledger-payout-failed': 'payout.failed',
    'ledger-seller-payout-addresses': 'seller.updated',
  },
  settlement: {
    'settlement-refund-initiated': 'refund.initiated',
    'settlement-seller-projection': 'seller.updated',
    'settlement-deposit-addresses': 'deposit.address_assigned',
    'settlement-deposit-transfers': 'transfer.observed',
    'settlement-payout-reserved': 'payout.reserved',
    'settlement-payout-refused': 'payout.refused',
  },
  notifier: {
    notifier_seller_updated: 'seller.updated',
    notifier_seller_payout_address_change_requested: 'seller.payout_address_change_requested',
    notifier_payment_confirmed: 'payment.confirmed',
    notifier_payment_reversed: 'payment.reversed',
    notifier_refund_requested: 'refund.requested',
    notifier_refund_completed: 'refund.completed',
    notifier_payment_refunded: 'payment.refunded',
    notifier_settlement_completed: 'settlement.completed',
    notifier_checkout_session_created: 'checkout.session_created',
    notifier_checkout_session_paid: 'checkout.session_paid',
    notifier_checkout_session_underpaid: 'checkout.session_underpaid',
    notifier_checkout_session_expired: 'checkout.session_expired',
    notifier_checkout_session_reopened: 'checkout.session_reopened',
    notifier_checkout_session_refunded: 'checkout.session_refunded',
  },
} as const satisfies Record<ServiceName, Record<string, Subject>>;

/** The events a seller's live channel (notifier, GET /api/v1/ws) passes on: each names its seller. */
export const SELLER_LIVE_EVENTS = [
  'payment.confirmed',
  'payment.reversed',
  'payment.call_failed',
  'payment.call_recovered',
  'payment.refunded',
  'refund.requested',
  'refund.approved',
  'refund.initiated',
  'refund.completed',
  'escrow.released',
  'settlement.completed',
  'skill.updated',
  'seller.updated',
  'seller.payout_address_change_requested',
] as const satisfies readonly Subject[];

/** Core NATS subscriptions (no durable, no ack); a pattern may end in `.*` (one token). */
export const LIVE_SUBSCRIPTIONS = {
  registry: [],
  'gateway-proxy': ['seller.updated'],
  checkout: ['seller.updated'],
  'chain-indexer': [],
  'escrow-ledger': ['seller.updated'],
  settlement: ['seller.updated'],
  notifier: ['checkout.*', ...SELLER_LIVE_EVENTS],
} as const satisfies Record<ServiceName, readonly string[]>;

export const SERVICE_NAMES = Object.keys(CONSUMERS) as ServiceName[];

/** The subject a declared durable consumer of `service` filters on, or undefined when it is not declared. */
export function declaredConsumerSubject(service: ServiceName, durable: string): Subject | undefined {
  const consumers = CONSUMERS[service] as Record<string, Subject>;
  return Object.hasOwn(consumers, durable) ? consumers[durable] : undefined;
}
