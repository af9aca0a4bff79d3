/**
 * Every refusal the registry answers, by its machine-readable code (the `error.code` of an HTTP answer, the `reason`
 * of an RPC reply), each named once here; a route's OpenAPI entry lists the ones it answers.
 */
export const RegistryReason = {
  // Requests the routes refuse before looking anything up (400).
  InvalidRequest: 'invalid_request',
  NotFound: 'not_found',

  // Credentials (401): a dashboard session token or an sk_ API key.
  MissingCredentials: 'missing_credentials',
  InvalidApiKey: 'invalid_api_key',
  UnknownApiKey: 'unknown_api_key',
  InvalidSession: 'invalid_session',
  /** registry.resolve_api_key: the key or token names no seller. */
  UnknownKey: 'unknown_key',

  // Sign-In with Ethereum (401).
  SiweDomainMismatch: 'siwe_domain_mismatch',
  SiweUriMismatch: 'siwe_uri_mismatch',
  SiweChainMismatch: 'siwe_chain_mismatch',
  SiweInvalidSignature: 'siwe_invalid_signature',
  SiweExpired: 'siwe_expired',
  SiweRefused: 'siwe_refused',
  SiweNonceInvalid: 'siwe_nonce_invalid',

  // A payout-address change signed by the account's wallet (401, 403).
  WalletSignatureRequired: 'wallet_signature_required',
  WalletSignatureInvalid: 'wallet_signature_invalid',
  PayoutChangeDomainMismatch: 'payout_change_domain_mismatch',
  PayoutChangeChainMismatch: 'payout_change_chain_mismatch',
  PayoutChangeExpired: 'payout_change_expired',
  PayoutChangeNonceInvalid: 'payout_change_nonce_invalid',
  PayoutChangeWrongAccount: 'payout_change_wrong_account',
  PayoutChangeWrongWallet: 'payout_change_wrong_wallet',

  // Skills and their endpoints (409, 413).
  SkillNameTaken: 'skill_name_taken',
  SkillLimitReached: 'skill_limit_reached',
  SkillArchived: 'skill_archived',
  SkillSuspended: 'skill_suspended',
  SkillTooLarge: 'skill_too_large',
  InvalidState: 'invalid_state',
  EndpointExists: 'endpoint_exists',
  EndpointInactive: 'endpoint_inactive',
  TooManyEndpoints: 'too_many_endpoints',
} as const;

export type RegistryReason = (typeof RegistryReason)[keyof typeof RegistryReason];
