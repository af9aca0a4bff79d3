/**
 * x402's sign-in-with-x extension as Paygate and its seller middleware declare it in a 402: a subscriber that paid
 * once answers the challenge with a `SIGN-IN-WITH-X` header (a CAIP-122 / EIP-4361 message its wallet signed)
 * instead of paying again. The shape is `@x402/extensions/sign-in-with-x`'s server declaration (its `info`,
 * `supportedChains` and JSON schema), built here without that package so the published SDKs need nothing more.
 */

/** The request header a signed message arrives in (HTTP header names are case-insensitive). */
export const SIGN_IN_WITH_X_HEADER = 'SIGN-IN-WITH-X';
/** The extension's key in `PaymentRequired.extensions`. */
const SIGN_IN_WITH_X = 'sign-in-with-x';

/** How long a challenge asks the signed message to stay valid (the verifier accepts messages up to 5 minutes old). */
const SIGN_IN_CHALLENGE_SECONDS = 300;

const STATEMENT = 'Sign in with the wallet that paid for this subscription';

/** The extension's JSON schema of a signed message (as `buildSIWxSchema` of @x402/extensions builds it). */
const SIGNED_MESSAGE_SCHEMA = Object.freeze({
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  type: 'object',
  properties: {
    domain: { type: 'string' },
    address: { type: 'string' },
    statement: { type: 'string' },
    uri: { type: 'string', format: 'uri' },
    version: { type: 'string' },
    chainId: { type: 'string' },
    type: { type: 'string' },
    nonce: { type: 'string' },
    issuedAt: { type: 'string', format: 'date-time' },
    expirationTime: { type: 'string', format: 'date-time' },
    notBefore: { type: 'string', format: 'date-time' },
    requestId: { type: 'string' },
    resources: { type: 'array', items: { type: 'string', format: 'uri' } },
    signature: { type: 'string' },
  },
  required: ['domain', 'address', 'uri', 'version', 'chainId', 'type', 'nonce', 'issuedAt', 'signature'],
});

function randomNonce(): string {
  const bytes = new Uint8Array(16);
  globalThis.crypto.getRandomValues(bytes);
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

/**
 * `extensions["sign-in-with-x"]` for a 402: the origin's host as the domain, the resource URL as the URI, a fresh
 * nonce, issuedAt now and an expiry 5 minutes on, for the chain's EVM wallets (EIP-191; ERC-1271 and ERC-6492
 * contract wallets sign the same message).
 */
export function signInWithXChallenge(input: {
  /** The public origin the buyer calls (`https://api.seller.example`). */
  origin: string;
  resourceUrl: string;
  chainId: number;
  now?: Date;
}): Record<string, unknown> {
  const now = input.now ?? new Date();
  return {
    [SIGN_IN_WITH_X]: {
      info: {
        domain: new URL(input.origin).host,
        uri: input.resourceUrl,
        statement: STATEMENT,
        version: '1',
        nonce: randomNonce(),
        issuedAt: now.toISOString(),
        expirationTime: new Date(now.getTime() + SIGN_IN_CHALLENGE_SECONDS * 1000).toISOString(),
        resources: [input.resourceUrl],
      },
      supportedChains: [{ chainId: `eip155:${input.chainId}`, type: 'eip191' }],
      schema: SIGNED_MESSAGE_SCHEMA,
    },
  };
}
