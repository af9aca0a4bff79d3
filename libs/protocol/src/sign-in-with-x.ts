/** x402's sign-in-with-x challenge, built without `@x402/extensions` so the SDKs need nothing more. */
export const SIGN_IN_WITH_X_HEADER = 'SIGN-IN-WITH-X';
const SIGN_IN_WITH_X = 'sign-in-with-x';
/** The verifier accepts messages up to 5 minutes old. */
const SIGN_IN_CHALLENGE_SECONDS = 300;

const STATEMENT = 'Sign in with the wallet that paid for this subscription';

/** As `buildSIWxSchema` of @x402/extensions builds it. */
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

/** `extensions["sign-in-with-x"]` for a 402: a fresh challenge for the origin and resource, for EVM wallets. */
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
