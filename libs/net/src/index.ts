/** Paygate's rule for calls to sellers' servers, at registration and again at connect time (see the README). */
export {
  type HostResolver,
  isForbiddenAddress,
  productionUrlProblem,
  publicUrlProblem,
  resolveAllAddresses,
} from './address-policy';
export { type OutboundPolicy, type SellerFetch, sellerDispatcher, sellerFetch } from './outbound';
