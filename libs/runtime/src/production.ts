import { createHash } from 'node:crypto';
import { ConfigError } from './config';

/** Public JSON-RPC endpoints, rate limited: a service polling one every few ms is throttled, goes blind. */
const PUBLIC_RATE_LIMITED_RPC_HOSTS: readonly string[] = [
  'mainnet.base.org',
  'sepolia.base.org',
  'mainnet-preconf.base.org',
  'sepolia-preconf.base.org',
];

/** The fastest polling a public rate-limited endpoint is allowed in production (Base makes a block every 2 s). */
const MIN_PUBLIC_RPC_POLL_INTERVAL_MS = 1000;

const MIN_PRODUCTION_SECRET_LENGTH = 24;

/** The shape of the fixed development values (dev-operator-token, …-not-secret, dev-only-…). */
const DEV_VALUE = /^dev[-_]|not[-_]?(a[-_])?secret|not[-_]for[-_]production|dev[-_]only/i;

const ZERO_ADDRESS = /^0x0{40}$/i;

/** sha256 (hex, no 0x) of anvil's and Hardhat's ten "test test … junk" keys: anyone can sign with them. */
const PUBLIC_DEV_KEY_HASHES: ReadonlySet<string> = new Set([
  'bc1a50966c9e6486bc4ebf880b51611a2a97fcb8e7a6976e9b81a9e3e8ca0e3c',
  '8335c55334821eefd4334369ff9c04a8594f161013cf9d87f58802d87297837e',
  'b26ab6529d20ebebb4192256f202984754f785481c64b1a1aed58cac93b3617e',
  '64034b44c579b335ab5e85debbfe72789e970138cc8d296799c3833a2a8525fb',
  '4d3e46eec8244d1d106f866ee48994f6176705298aee1b8426b2ad2529eb454b',
  '0aedba9d586f34f95cf1f0d54926f62e8a078ce2ca593be73ab27a87d3ff9c5d',
  '28e543d3753fc9d14c658ebef20b76a3b5f8e7d78667baf27832ceb3bea01bdf',
  'f070994a8599478580678f2b9482c5f02bb3de0647281e8efae183669425808a',
  '38e69fdd19aefeb4adf56312f10e62c30274997835173c7006308323ad7db506',
  '967f21586cdf1248a862f2cfb330099701c942c2c7a7537c54f7ec48f8556505',
]);

function isPublicDevKey(privateKey: string): boolean {
  const hex = privateKey.trim().replace(/^0x/i, '').toLowerCase();
  return PUBLIC_DEV_KEY_HASHES.has(createHash('sha256').update(hex).digest('hex'));
}

/** Placeholder words that make a secret guessable whatever its length. */
const PLACEHOLDER =
  /change-?me|replace-?me|pass-?w(o|0)rd|placeholder|example|default|qwerty|letmein|12345678|xxxxxx/i;
/** Below this many estimated bits a secret is guessable (a random 24-character token has over 100). */
const MIN_SECRET_BITS = 64;
const MIN_DISTINCT_CHARACTERS = 10;

/** Why a secret is predictable: a placeholder, few distinct characters, a repeated unit, low entropy. */
function weakSecretProblem(value: string): string | undefined {
  if (PLACEHOLDER.test(value)) return 'is a placeholder value';
  const body = value.replace(/^0x/i, '');
  const counts = new Map<string, number>();
  for (const char of body) counts.set(char, (counts.get(char) ?? 0) + 1);
  if (counts.size < MIN_DISTINCT_CHARACTERS)
    return `has only ${counts.size} distinct characters (at least ${MIN_DISTINCT_CHARACTERS})`;
  for (let unit = 1; unit <= body.length / 2; unit++) {
    if (body.length % unit === 0 && body.slice(0, unit).repeat(body.length / unit) === body)
      return 'repeats a short pattern';
  }
  let perCharacter = 0;
  for (const count of counts.values()) {
    const p = count / body.length;
    perCharacter -= p * Math.log2(p);
  }
  const bits = Math.floor(perCharacter * body.length);
  if (bits < MIN_SECRET_BITS)
    return `has too little entropy (about ${bits} bits, at least ${MIN_SECRET_BITS})`;
  return undefined;
}

interface ProductionGuardOptions {
  serviceName: string;
  /** NODE_ENV=production; every rule below applies only then. */
  production: boolean;
  /** Never the zero address; ESCROW_ADDRESS set unless `fromKey` (settlement derives it from its key). */
  escrow?: { address: string; fromKey?: boolean };
  /** A service that polls the chain: a public rate-limited endpoint needs polls at least 1 s apart. */
  rpcPolling?: { url: string; intervalMs: number; variable: string };
  /** Set explicitly, long enough (24 characters unless given), not a development value, not guessable. */
  secrets?: ReadonlyArray<string | { name: string; minLength: number }>;
  /** The gateway and the indexer must count confirmations alike: both need the one shared CONFIRMATIONS. */
  sharedConfirmations?: boolean;
  /** A service that must know the checkout wallet (the indexer watches it, the ledger reconciles it). */
  checkoutWallet?: boolean;
  /** Keys the service signs with: never a public anvil/Hardhat key nor a guessable one; empty is skipped. */
  privateKeys?: ReadonlyArray<{ name: string; value: string | undefined }>;
}

/** The one production check of a service's config: one ConfigError naming every variable breaking a rule. */
export function productionGuards(env: NodeJS.ProcessEnv, options: ProductionGuardOptions): void {
  if (!options.production) return;
  const problems: string[] = [];
  if (options.escrow) {
    if (!options.escrow.fromKey && !env.ESCROW_ADDRESS?.trim())
      problems.push('ESCROW_ADDRESS: must be set to the escrow wallet in production (no default)');
    else if (ZERO_ADDRESS.test(options.escrow.address))
      problems.push('ESCROW_ADDRESS: must not be the zero address in production');
  }
  if (options.rpcPolling) {
    const { url, intervalMs, variable } = options.rpcPolling;
    let host = '';
    try {
      host = new URL(url).hostname.toLowerCase();
    } catch {
      // chainConfig already refused a malformed URL
    }
    if (PUBLIC_RATE_LIMITED_RPC_HOSTS.includes(host) && intervalMs < MIN_PUBLIC_RPC_POLL_INTERVAL_MS)
      problems.push(
        `CHAIN_RPC_URL: ${host} is a public rate-limited endpoint; with ${variable}=${intervalMs} it is throttled ` +
          `in production: use a provider's endpoint or set ${variable} to at least ${MIN_PUBLIC_RPC_POLL_INTERVAL_MS}`,
      );
  }
  if (options.checkoutWallet) {
    const checkoutWallet = env.CHECKOUT_ESCROW_ADDRESS?.trim();
    if (!checkoutWallet)
      problems.push(
        "CHECKOUT_ESCROW_ADDRESS: must be set in production (the checkout wallet sessions are paid to, the same as checkout's)",
      );
    else if (ZERO_ADDRESS.test(checkoutWallet))
      problems.push('CHECKOUT_ESCROW_ADDRESS: must not be the zero address in production');
  }
  for (const secret of options.secrets ?? []) {
    const { name, minLength } =
      typeof secret === 'string' ? { name: secret, minLength: MIN_PRODUCTION_SECRET_LENGTH } : secret;
    const value = env[name] ?? '';
    if (!value.trim()) problems.push(`${name}: must be set in production (no default)`);
    else if (value.length < minLength)
      problems.push(`${name}: must be at least ${minLength} characters in production`);
    else if (DEV_VALUE.test(value)) problems.push(`${name}: must not be a development value in production`);
    else {
      const weak = weakSecretProblem(value);
      if (weak) problems.push(`${name}: must not be guessable in production: it ${weak}`);
    }
  }
  for (const { name, value } of options.privateKeys ?? []) {
    if (!value?.trim()) continue;
    // The value is never echoed.
    if (isPublicDevKey(value))
      problems.push(
        `${name}: must not be a public anvil/Hardhat development key in production (anyone holds it)`,
      );
    else if (weakSecretProblem(value)) problems.push(`${name}: must not be a guessable key in production`);
  }
  if (options.sharedConfirmations && !env.CONFIRMATIONS?.trim())
    problems.push(
      'CONFIRMATIONS: must be set in production, the same value for gateway-proxy and chain-indexer ' +
        '(one shared setting; the per-service defaults differ)',
    );
  if (problems.length > 0)
    throw new ConfigError(
      `invalid production configuration of ${options.serviceName}: ${problems.join('; ')}`,
    );
}
