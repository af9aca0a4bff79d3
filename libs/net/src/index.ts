/**
 * Paygate's outbound network rules for calls to sellers' servers: which addresses are forbidden in production,
 * the check of a seller URL at registration, and connections (undici dispatchers) that apply
 * the same rule again at connect time, against DNS rebinding.
 */
export {
  type HostResolver,
  isForbiddenAddress,
  productionUrlProblem,
  publicUrlProblem,
  resolveAllAddresses,
} from './address-policy';
export { type OutboundPolicy, type SellerFetch, sellerDispatcher, sellerFetch } from './outbound';
