export { type SettleResponse, X402_HEADERS } from '@paygate/protocol';
export { createGateway, type Gateway } from './gateway';
export { PaygateUnavailableError } from './paygate-api';
export { resolvePaygateUrl } from './paygate-url';
export type { PaymentParameters } from './payment-parameters';
export { MemoryReplayStore, TicketVerifier } from './tickets';
export type {
  GatewayConfig,
  ProductConfig,
  ServiceConfig,
  SubscriptionConfig,
  TicketOptions,
  TicketReplayStore,
  X402Payment,
} from './types';
export {
  type PaygateRequest,
  type VerifyPaygateRequestOptions,
  verifyPaygateRequest,
} from './verify-request';
export {
  computeWebhookSignature,
  isValidWebhook,
  type OtherWebhook,
  type PaygateWebhookEvent,
  type PaymentRefundedWebhook,
  type PayoutAddressChangeRequestedWebhook,
  type RefundCompletedWebhook,
  type RefundRequestedWebhook,
  type SignWebhookOptions,
  signWebhook,
  type VerifyWebhookOptions,
  verifyWebhook,
  WEBHOOK_DEFAULT_TOLERANCE_SECONDS,
  WEBHOOK_EVENT_ID_HEADER,
  WEBHOOK_EVENT_TYPE_HEADER,
  WEBHOOK_SIGNATURE_HEADER,
  type WebhookBody,
  type WebhookPayload,
  WebhookVerificationError,
  type WebhookVerificationFailure,
} from './webhooks';
export {
  createX402Seller,
  type X402PaymentRequired,
  type X402Sale,
  type X402Seller,
  type X402SellerConfig,
  type X402Settlement,
} from './x402-seller';
