export {
  CONSUMERS,
  declaredConsumerSubject,
  LIVE_SUBSCRIPTIONS,
  SELLER_LIVE_EVENTS,
  SERVICE_NAMES,
} from './bus-access';
export { type EventEnvelope, newEventId, newRandomUlid, TraceContext } from './envelope';
export { CheckoutSessionSnapshot } from './events/checkout';
export type { ClaimedVia } from './events/claims';
export { CHECKOUT_MATCHING_MODES, type CheckoutMatchingMode } from './events/registry';
export { DEFAULT_HOLD_HOURS, DEFAULT_HOLD_HOURS_BY_KIND } from './holds';
export { Nullable, StringEnum, UsdcAmount } from './primitives';
export {
  API_KEY_PATTERN,
  DepositHoldingsReply,
  PUBLISHABLE_KEY_PATTERN,
  RelayerStatusReply,
  RelayerSubmitReply,
  RelayerSubmitRequest,
  RPCS,
  type RpcName,
  type RpcReply,
  type RpcRequest,
  RpcValidationError,
  refundTakesOverClaim,
  SESSION_TOKEN_PATTERN,
  TransferAuthorization,
  validateRpcReply,
  validateRpcRequest,
} from './rpcs';
export { ALL_SUBJECTS, type EventData, type ServiceName, SUBJECTS, type Subject } from './subjects';
export { createEvent, EventValidationError, validateEvent } from './validation';
