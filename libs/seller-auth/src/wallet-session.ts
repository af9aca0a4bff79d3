import { HttpError } from '@paygate/http';

/** How a seller's bearer token proves who it is: the sk_ API key, or the wallet's Sign-In with Ethereum session. */
export type SellerCredential = 'api_key' | 'session';

export const credentialOf = (token: string): SellerCredential =>
  token.startsWith('sk_') ? 'api_key' : 'session';

/**
 * What only the account wallet may do (change where events go, rotate keys): an API key leaks with its server, so
 * with it alone these are refused 403, naming the credential they need.
 */
export function requireWalletSession(credential: SellerCredential | undefined, action: string): void {
  if (credential === 'session') return;
  throw new HttpError(
    403,
    'wallet_session_required',
    `${action} needs the account wallet's Sign-In with Ethereum session (Authorization: Bearer <session token> from POST /api/v1/auth/siwe/verify); the sk_ API key alone cannot do it`,
    { field: 'Authorization', rule: "must be the account wallet's session token (Sign-In with Ethereum)" },
  );
}
