import { addressOfPrivateKey } from '@paygate/chain';
import { int, parseEnv, str, throwIfProblems } from '@paygate/runtime';

/** The x402 relayer's settings (RELAYER_*). Without RELAYER_PRIVATE_KEY the relayer is off and x402 is not offered. */
export interface RelayerConfig {
  /** Gas-only key; never the escrow key. Not enumerable on the config object, never logged. */
  privateKey: string;
  address: string;
  minBalanceWei: bigint;
  feeBumpAfterMs: number;
  maxFeeBumps: number;
  maxFeePerGasCapWei: bigint;
  receiptPollMs: number;
  /** RELAYER_WS_URL: a ws(s) URL of the chain's node for pushed heads; undefined polls only. */
  headsWsUrl: string | undefined;
  lookbackBlocks: number;
  /** How long a payer (and its contract code) is refused after a transaction relayed for it reverted on chain. */
  revertRefusalMs: number;
}

const GWEI = 1_000_000_000n;

export function loadRelayerConfig(env: NodeJS.ProcessEnv, escrowPrivateKey: string): RelayerConfig | null {
  // Bad settings are reported with the key's problems below, and only when the relayer is configured at all.
  const problems: string[] = [];
  const parsed = parseEnv(
    env,
    {
      RELAYER_PRIVATE_KEY: str({ default: '' }),
      // 0.0005 ETH: a few hundred transferWithAuthorization calls on Base at normal fees.
      RELAYER_MIN_BALANCE_WEI: str({ default: '500000000000000' }),
      RELAYER_FEE_BUMP_AFTER_MS: int({ default: 15_000, min: 1 }),
      RELAYER_MAX_FEE_BUMPS: int({ default: 5, min: 0 }),
      RELAYER_MAX_FEE_GWEI: int({ default: 50, min: 1 }),
      RELAYER_RECEIPT_POLL_MS: int({ default: 20, min: 1 }),
      RELAYER_WS_URL: str({ default: '' }),
      RELAYER_LOOKBACK_BLOCKS: int({ default: 5000, min: 1 }),
      // A week: long enough that a payer (or a wallet's code) that made one relayed transaction revert costs the
      // relayer at most one transaction a week; an honest payer still pays with X-402-Payment meanwhile.
      RELAYER_REVERT_REFUSAL_HOURS: int({ default: 168, min: 1, max: 24 * 365 }),
    },
    problems,
  );
  if (!parsed.RELAYER_PRIVATE_KEY) return null;
  const address = addressOfPrivateKey(parsed.RELAYER_PRIVATE_KEY);
  if (!address) problems.push('RELAYER_PRIVATE_KEY: must be a 0x-prefixed 32-byte hex key');
  if (parsed.RELAYER_PRIVATE_KEY.toLowerCase() === escrowPrivateKey.toLowerCase()) {
    problems.push('RELAYER_PRIVATE_KEY: must not be the escrow key (the relayer holds gas only)');
  }
  if (!/^[0-9]{1,30}$/.test(parsed.RELAYER_MIN_BALANCE_WEI ?? '')) {
    problems.push('RELAYER_MIN_BALANCE_WEI: must be a whole number of wei');
  }
  if (parsed.RELAYER_WS_URL && !/^wss?:\/\/[^\s]+$/.test(parsed.RELAYER_WS_URL)) {
    problems.push('RELAYER_WS_URL: must be a ws:// or wss:// URL');
  }
  throwIfProblems(problems, parsed);
  const config: RelayerConfig = {
    address: address!,
    minBalanceWei: BigInt(parsed.RELAYER_MIN_BALANCE_WEI),
    feeBumpAfterMs: parsed.RELAYER_FEE_BUMP_AFTER_MS,
    maxFeeBumps: parsed.RELAYER_MAX_FEE_BUMPS,
    maxFeePerGasCapWei: BigInt(parsed.RELAYER_MAX_FEE_GWEI) * GWEI,
    receiptPollMs: parsed.RELAYER_RECEIPT_POLL_MS,
    headsWsUrl: parsed.RELAYER_WS_URL || undefined,
    lookbackBlocks: parsed.RELAYER_LOOKBACK_BLOCKS,
    revertRefusalMs: parsed.RELAYER_REVERT_REFUSAL_HOURS * 3_600_000,
  } as RelayerConfig;
  Object.defineProperty(config, 'privateKey', { value: parsed.RELAYER_PRIVATE_KEY, enumerable: false });
  return config;
}
