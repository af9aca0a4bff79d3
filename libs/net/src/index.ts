/**
 * Paygate's outbound network rules for calls to sellers' servers: which addresses are forbidden in production,
 * the check of a seller URL at registration, and connections (undici dispatchers) that apply
 * the same rule again at connect time, against DNS rebinding.
 */
export {
  forbiddenAddressProblem,
  type HostResolver,
  isForbiddenAddress,
  productionUrlProblem,
  publicUrlProblem,
  resolveAllAddresses,
} from './address-policy';
export {
  connectLookup,
  ForbiddenAddressError,
  type OutboundPolicy,
  type SellerDispatcherOptions,
  type SellerFetch,
  sellerDispatcher,
  sellerFetch,
} from './outbound';
