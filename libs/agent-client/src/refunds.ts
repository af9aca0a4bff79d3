/** The `./refunds` subpath: buyer refund requests, defined in @paygate/protocol (browser-safe: no Node built-ins). */
export {
  newRefundRequestSigning,
  REFUND_REQUEST_MAX_VALIDITY_MS,
  type RefundRequestSigning,
  type RefundRequestStatus,
  type RefundRequestView,
  type RefundTarget,
  refundRequestMessage,
  signRefundRequest,
} from '@paygate/protocol/refunds';
