export { onSellerUpdated, SellerAuth } from './middleware';
export { PUBLISHABLE_KEY_PATTERN, type ResolveApiKeyReply, type SellerIdentity } from './protocol';
export { credentialOf, requireWalletSession } from './wallet-session';
