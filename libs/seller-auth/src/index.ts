export { PUBLISHABLE_KEY_PATTERN } from '@paygate/contracts';
export { onSellerUpdated, type ResolveApiKeyReply, SellerAuth, type SellerIdentity } from './middleware';
export { credentialOf, requireWalletSession } from './wallet-session';
