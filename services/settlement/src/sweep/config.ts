import { formatAddress } from '@paygate/chain';
import { ConfigError, num, parseEnv, str } from '@paygate/runtime';
import { Wallet } from 'ethers';

/**
 * The checkout deposit wallet's settings (CHECKOUT_ESCROW_*). Checkout sessions are paid to that wallet, not to
 * the agent escrow, so an agent's 402 payment can never match a session by amount; settlement holds its key and
 * sweeps its USDC into the escrow wallet, from which every payout and refund is paid. Without
 * CHECKOUT_ESCROW_PRIVATE_KEY the sweeper is off (sessions then share the escrow address, the old design).
 */
export interface CheckoutSweepConfig {
  /** The deposit wallet's key. Not enumerable on the config object, never logged. */
  privateKey: string;
  address: string;
  /** How often its balance is read and, when positive, moved into escrow. */
  intervalMs: number;
  /** Smallest balance worth a sweep (micro-USDC): below it the gas is not spent. */
  minAmountMicro: bigint;
}

export function loadCheckoutSweepConfig(
  env: NodeJS.ProcessEnv,
  escrowPrivateKey: string,
  production: boolean,
): CheckoutSweepConfig | null {
  const parsed = parseEnv<{
    CHECKOUT_ESCROW_PRIVATE_KEY: string;
    CHECKOUT_ESCROW_ADDRESS: string;
    CHECKOUT_SWEEP_INTERVAL_MS: number;
    CHECKOUT_SWEEP_MIN_MICRO: number;
  }>(env, {
    CHECKOUT_ESCROW_PRIVATE_KEY: str({ default: '' }),
    CHECKOUT_ESCROW_ADDRESS: str({ default: '' }),
    // Well inside the transfer worker's pre-flight retries (MAX_PREFLIGHT_ATTEMPTS x TRANSFER_POLL_INTERVAL_MS),
    // so a refund of a checkout payment made right after it never runs out of escrow USDC for long.
    CHECKOUT_SWEEP_INTERVAL_MS: num({ default: 5000 }),
    CHECKOUT_SWEEP_MIN_MICRO: num({ default: 1 }),
  });
  if (!parsed.CHECKOUT_ESCROW_PRIVATE_KEY) {
    // Checkout requires its deposit wallet in production: without the key its USDC could never be paid out.
    if (production && parsed.CHECKOUT_ESCROW_ADDRESS.trim()) {
      throw new ConfigError(
        'invalid configuration: CHECKOUT_ESCROW_PRIVATE_KEY: must be set in production when CHECKOUT_ESCROW_ADDRESS is (settlement sweeps the checkout deposit wallet into escrow)',
      );
    }
    return null;
  }
  const problems: string[] = [];
  let address: string | undefined;
  try {
    if (/^0x[0-9a-fA-F]{64}$/.test(parsed.CHECKOUT_ESCROW_PRIVATE_KEY)) {
      address = new Wallet(parsed.CHECKOUT_ESCROW_PRIVATE_KEY).address;
    }
  } catch {
    // Out of the curve's range; reported below.
  }
  if (!address) problems.push('CHECKOUT_ESCROW_PRIVATE_KEY: must be a 0x-prefixed 32-byte hex key');
  else if (parsed.CHECKOUT_ESCROW_PRIVATE_KEY.toLowerCase() === escrowPrivateKey.toLowerCase()) {
    problems.push('CHECKOUT_ESCROW_PRIVATE_KEY: must not be the escrow key (a distinct deposit wallet)');
  } else if (parsed.CHECKOUT_ESCROW_ADDRESS.trim()) {
    let configured = '';
    try {
      configured = formatAddress(parsed.CHECKOUT_ESCROW_ADDRESS.trim());
    } catch {
      problems.push('CHECKOUT_ESCROW_ADDRESS: must be a 20-byte hex address');
    }
    if (configured && configured !== address) {
      problems.push('CHECKOUT_ESCROW_ADDRESS: must be the address of CHECKOUT_ESCROW_PRIVATE_KEY');
    }
  }
  if (!Number.isSafeInteger(parsed.CHECKOUT_SWEEP_INTERVAL_MS) || parsed.CHECKOUT_SWEEP_INTERVAL_MS < 100) {
    problems.push('CHECKOUT_SWEEP_INTERVAL_MS: must be an integer of at least 100 (milliseconds)');
  }
  if (!Number.isSafeInteger(parsed.CHECKOUT_SWEEP_MIN_MICRO) || parsed.CHECKOUT_SWEEP_MIN_MICRO < 1) {
    problems.push('CHECKOUT_SWEEP_MIN_MICRO: must be a positive integer (micro-USDC)');
  }
  if (problems.length > 0) throw new ConfigError(`invalid configuration: ${problems.join('; ')}`);
  const config = {
    address: address!,
    intervalMs: parsed.CHECKOUT_SWEEP_INTERVAL_MS,
    minAmountMicro: BigInt(parsed.CHECKOUT_SWEEP_MIN_MICRO),
  } as CheckoutSweepConfig;
  Object.defineProperty(config, 'privateKey', {
    value: parsed.CHECKOUT_ESCROW_PRIVATE_KEY,
    enumerable: false,
  });
  return config;
}
