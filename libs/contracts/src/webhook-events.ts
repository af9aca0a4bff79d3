/**
 * The bus events that become webhooks (for every seller with a webhook URL), and so the kinds a webhook endpoint
 * may ask for: the notifier sends them, the dashboard offers them. No imports: the dashboard bundles this file
 * alone (`@paygate/contracts/webhook-events`).
 */
export const WEBHOOK_EVENT_TYPES = [
  'payment.confirmed',
  'payment.reversed',
  'refund.requested',
  'refund.completed',
  // A paid call the seller did not serve, refunded by the ledger without the seller's approval (reason, amount).
  'payment.refunded',
  'settlement.completed',
  'checkout.session_created',
  'checkout.session_paid',
  'checkout.session_underpaid',
  'checkout.session_expired',
  'checkout.session_reopened',
  'checkout.session_refunded',
  // The account wallet signed a new payout address: the seller hears of it before it takes effect.
  'seller.payout_address_change_requested',
] as const;
