/** The bus events that become webhooks. No imports: the dashboard bundles this file alone. */
export const WEBHOOK_EVENT_TYPES = [
  'payment.confirmed',
  'payment.reversed',
  'refund.requested',
  'refund.completed',
  'payment.refunded',
  'settlement.completed',
  'checkout.session_created',
  'checkout.session_paid',
  'checkout.session_underpaid',
  'checkout.session_expired',
  'checkout.session_reopened',
  'checkout.session_refunded',
  'seller.payout_address_change_requested',
] as const;
