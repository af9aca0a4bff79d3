import { addressOfPrivateKey } from '@paygate/chain';
import { int, parseEnv, str, throwIfProblems } from '@paygate/runtime';
import { withHidden } from '../secrets';

/** The x402 relayer's settings (RELAYER_*, meanings in the README); null without a key (x402 not offered). */
export type RelayerConfig = NonNullable<ReturnType<typeof loadRelayerConfig>>;

const GWEI = 1_000_000_000n;
/** Keys in one pool, at most: each is a nonce sequence, an advisory lock and a balance read. */
const MAX_KEYS = 64;

export function loadRelayerConfig(env: NodeJS.ProcessEnv, escrowPrivateKey: string) {
  // Bad settings are reported with the key's problems below, and only when the relayer is configured at all.
  const problems: string[] = [];
  const parsed = parseEnv(
    env,
    {
      RELAYER_PRIVATE_KEY: str({ default: '' }),
      RELAYER_PRIVATE_KEYS: str({ default: '' }),
      // Several blocks on every chain Paygate runs on (Base: 2 s, Flashblocks 200 ms), far below the fee bump.
      RELAYER_STUCK_AFTER_MS: int({ default: 10_000, min: 100 }),
      RELAYER_CODE_HASH_REFUSAL_PAYERS: int({ default: 3, min: 1, max: 1000 }),
      // 0.0005 ETH: a few hundred transferWithAuthorization calls on Base at normal fees.
      RELAYER_MIN_BALANCE_WEI: str({ default: '500000000000000' }),
      RELAYER_FEE_BUMP_AFTER_MS: int({ default: 15_000, min: 1 }),
      RELAYER_MAX_FEE_BUMPS: int({ default: 5, min: 0 }),
      RELAYER_MAX_FEE_GWEI: int({ default: 50, min: 1 }),
      RELAYER_RECEIPT_POLL_MS: int({ default: 20, min: 1 }),
      RELAYER_WS_URL: str({ default: '' }),
      RELAYER_LOOKBACK_BLOCKS: int({ default: 5000, min: 1 }),
      // A week: a payer that made one relayed transaction revert costs at most one a week.
      RELAYER_REVERT_REFUSAL_HOURS: int({ default: 168, min: 1, max: 24 * 365 }),
    },
    problems,
  );
  const keysVariable = parsed.RELAYER_PRIVATE_KEYS ? 'RELAYER_PRIVATE_KEYS' : 'RELAYER_PRIVATE_KEY';
  const keys = (parsed.RELAYER_PRIVATE_KEYS || parsed.RELAYER_PRIVATE_KEY || '')
    .split(',')
    .map((key) => key.trim())
    .filter((key) => key !== '');
  if (keys.length === 0) return null;
  if (keys.length > MAX_KEYS) problems.push(`${keysVariable}: at most ${MAX_KEYS} keys`);
  if (
    parsed.RELAYER_PRIVATE_KEYS &&
    parsed.RELAYER_PRIVATE_KEY &&
    parsed.RELAYER_PRIVATE_KEY.toLowerCase() !== keys[0]!.toLowerCase()
  ) {
    problems.push('RELAYER_PRIVATE_KEY: set RELAYER_PRIVATE_KEYS alone, or make this its first key');
  }
  const addresses = keyAddresses(keys, keysVariable, escrowPrivateKey, problems);
  if (!/^[0-9]{1,30}$/.test(parsed.RELAYER_MIN_BALANCE_WEI ?? '')) {
    problems.push('RELAYER_MIN_BALANCE_WEI: must be a whole number of wei');
  }
  if (parsed.RELAYER_WS_URL && !/^wss?:\/\/[^\s]+$/.test(parsed.RELAYER_WS_URL)) {
    problems.push('RELAYER_WS_URL: must be a ws:// or wss:// URL');
  }
  throwIfProblems(problems, parsed);
  const config = {
    address: addresses[0]!,
    addresses,
    stuckAfterMs: parsed.RELAYER_STUCK_AFTER_MS,
    codeHashRefusalPayers: parsed.RELAYER_CODE_HASH_REFUSAL_PAYERS,
    minBalanceWei: BigInt(parsed.RELAYER_MIN_BALANCE_WEI),
    feeBumpAfterMs: parsed.RELAYER_FEE_BUMP_AFTER_MS,
    maxFeeBumps: parsed.RELAYER_MAX_FEE_BUMPS,
    maxFeePerGasCapWei: BigInt(parsed.RELAYER_MAX_FEE_GWEI) * GWEI,
    receiptPollMs: parsed.RELAYER_RECEIPT_POLL_MS,
    /** Undefined polls only. */
    headsWsUrl: parsed.RELAYER_WS_URL || undefined,
    lookbackBlocks: parsed.RELAYER_LOOKBACK_BLOCKS,
    revertRefusalMs: parsed.RELAYER_REVERT_REFUSAL_HOURS * 3_600_000,
  };
  return withHidden(config, { privateKeys: keys });
}

/** The keys' addresses; a malformed, repeated or escrow key is a problem. */
function keyAddresses(keys: string[], variable: string, escrowPrivateKey: string, problems: string[]) {
  const addresses: string[] = [];
  for (const [i, key] of keys.entries()) {
    const which = keys.length > 1 ? `${variable} (key ${i + 1})` : variable;
    const address = addressOfPrivateKey(key);
    if (!address) problems.push(`${which}: must be a 0x-prefixed 32-byte hex key`);
    else if (addresses.includes(address)) problems.push(`${which}: the same key twice`);
    else addresses.push(address);
    if (key.toLowerCase() === escrowPrivateKey.toLowerCase()) {
      problems.push(`${which}: must not be the escrow key (the relayer holds gas only)`);
    }
  }
  return addresses;
}
