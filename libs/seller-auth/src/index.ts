export { bearerToken, onSellerUpdated, SellerAuth } from './middleware';
export {
  API_KEY_PATTERN,
  PUBLISHABLE_KEY_PATTERN,
  type ResolveApiKeyReply,
  type SellerIdentity,
} from './protocol';
export { credentialOf, requireWalletSession, type SellerCredential } from './wallet-session';
