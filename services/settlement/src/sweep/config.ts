import { addressOfPrivateKey } from '@paygate/chain';
import { ConfigError, int, optionalAddress, parseEnv, str, throwIfProblems } from '@paygate/runtime';
import { HDNodeWallet, Mnemonic } from 'ethers';

/**
 * The checkout deposit wallet's settings (CHECKOUT_ESCROW_*). Checkout sessions are paid to that wallet, not to
 * the agent escrow, so an agent's 402 payment can never match a session by amount; settlement holds its key and
 * sweeps its USDC into the escrow wallet, from which every payout and refund is paid. Without
 * CHECKOUT_ESCROW_PRIVATE_KEY the sweeper is off (sessions then share the escrow address).
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

/** Smallest balance worth a sweep by default (micro-USDC): 0.01 USDC, several times one relayed transfer's gas on Base. */
export const DEFAULT_SWEEP_MIN_MICRO = 10_000;

/** The public anvil/Hardhat mnemonic: `make dev` and the tests derive deposit addresses from it; never production. */
export const DEV_DEPOSIT_MNEMONIC = 'test test test test test test test test test test test junk';
/** Account 1' of the BIP-44 Ethereum tree: none of its children is one of anvil's funded accounts (account 0'). */
export const DEFAULT_DEPOSIT_PATH = "m/44'/60'/1'/0";

/**
 * The session deposit addresses' key (CHECKOUT_DEPOSIT_MNEMONIC or CHECKOUT_DEPOSIT_XPRV, at CHECKOUT_DEPOSIT_PATH):
 * checkout holds only its public half (CHECKOUT_DEPOSIT_XPUB) and assigns child indexes; settlement derives each
 * child's key to sign the EIP-3009 authorization that sweeps it into escrow, and its relayer pays the gas.
 */
export interface DepositSweepConfig {
  /** The private node whose children are the deposit addresses. Not enumerable on the config object, never logged. */
  node: HDNodeWallet;
  /** Its public half: must equal checkout's CHECKOUT_DEPOSIT_XPUB. */
  xpub: string;
  intervalMs: number;
  /** Smallest balance swept (micro-USDC); below it the address keeps its dust until more arrives. */
  minAmountMicro: bigint;
  /** Addresses read (and swept) per pass at most. */
  batchSize: number;
  /** How long a sweep authorization stays valid (seconds). */
  validitySeconds: number;
}

export function loadDepositSweepConfig(env: NodeJS.ProcessEnv, production: boolean): DepositSweepConfig {
  const problems: string[] = [];
  const parsed = parseEnv(
    env,
    {
      CHECKOUT_DEPOSIT_MNEMONIC: str({ default: '' }),
      CHECKOUT_DEPOSIT_XPRV: str({ default: '' }),
      CHECKOUT_DEPOSIT_PATH: str({ default: DEFAULT_DEPOSIT_PATH }),
      CHECKOUT_SWEEP_INTERVAL_MS: int({ default: 5000, min: 100 }),
      CHECKOUT_SWEEP_MIN_MICRO: int({ default: DEFAULT_SWEEP_MIN_MICRO, min: 1 }),
      CHECKOUT_SWEEP_BATCH: int({ default: 50, min: 1 }),
      CHECKOUT_SWEEP_VALIDITY_SECONDS: int({ default: 86_400, min: 600 }),
    },
    problems,
  );
  const mnemonic = (parsed.CHECKOUT_DEPOSIT_MNEMONIC ?? '').trim().replace(/\s+/g, ' ');
  const xprv = (parsed.CHECKOUT_DEPOSIT_XPRV ?? '').trim();
  let node: HDNodeWallet | undefined;
  if (mnemonic && xprv)
    problems.push('CHECKOUT_DEPOSIT_MNEMONIC and CHECKOUT_DEPOSIT_XPRV: set one, not both');
  else if (xprv) {
    try {
      const parsedNode = HDNodeWallet.fromExtendedKey(xprv);
      if (parsedNode instanceof HDNodeWallet) node = parsedNode;
      else problems.push('CHECKOUT_DEPOSIT_XPRV: must be an extended private key (xprv…)');
    } catch {
      problems.push('CHECKOUT_DEPOSIT_XPRV: must be an extended private key (xprv…)');
    }
  } else if (mnemonic || !production) {
    try {
      node = HDNodeWallet.fromMnemonic(
        Mnemonic.fromPhrase(mnemonic || DEV_DEPOSIT_MNEMONIC),
        parsed.CHECKOUT_DEPOSIT_PATH,
      );
    } catch {
      problems.push(
        'CHECKOUT_DEPOSIT_MNEMONIC / CHECKOUT_DEPOSIT_PATH: must be a BIP-39 mnemonic and a BIP-32 path',
      );
    }
  } else {
    problems.push(
      'CHECKOUT_DEPOSIT_MNEMONIC or CHECKOUT_DEPOSIT_XPRV: must be set in production (the key of the session deposit addresses)',
    );
  }
  if (production && node) {
    const devXpub = HDNodeWallet.fromMnemonic(
      Mnemonic.fromPhrase(DEV_DEPOSIT_MNEMONIC),
      node.path ?? DEFAULT_DEPOSIT_PATH,
    ).neuter().extendedKey;
    if (mnemonic === DEV_DEPOSIT_MNEMONIC || node.neuter().extendedKey === devXpub) {
      problems.push(
        'CHECKOUT_DEPOSIT_MNEMONIC / CHECKOUT_DEPOSIT_XPRV: is the public test mnemonic; anyone could sweep it',
      );
    }
  }
  throwIfProblems(problems, parsed);
  const config = {
    xpub: node!.neuter().extendedKey,
    intervalMs: parsed.CHECKOUT_SWEEP_INTERVAL_MS,
    minAmountMicro: BigInt(parsed.CHECKOUT_SWEEP_MIN_MICRO),
    batchSize: parsed.CHECKOUT_SWEEP_BATCH,
    validitySeconds: parsed.CHECKOUT_SWEEP_VALIDITY_SECONDS,
  } as DepositSweepConfig;
  Object.defineProperty(config, 'node', { value: node, enumerable: false });
  // A logged or serialised config shows the settings (the amount as a decimal string), never the key.
  Object.defineProperty(config, 'toJSON', {
    value: () => ({ ...config, minAmountMicro: config.minAmountMicro.toString() }),
    enumerable: false,
  });
  return config;
}

export function loadCheckoutSweepConfig(
  env: NodeJS.ProcessEnv,
  escrowPrivateKey: string,
  production: boolean,
): CheckoutSweepConfig | null {
  // Bad settings are reported with the key's problems below, and only when the key is set.
  const problems: string[] = [];
  const parsed = parseEnv(
    env,
    {
      CHECKOUT_ESCROW_PRIVATE_KEY: str({ default: '' }),
      CHECKOUT_ESCROW_ADDRESS: optionalAddress(),
      // Well inside the transfer worker's pre-flight retries (MAX_PREFLIGHT_ATTEMPTS x TRANSFER_POLL_INTERVAL_MS),
      // so a refund of a checkout payment made right after it never runs out of escrow USDC for long.
      CHECKOUT_SWEEP_INTERVAL_MS: int({ default: 5000, min: 100 }),
      // 0.01 USDC: below it a sweep would spend a noticeable share of the amount on gas; dust waits for more.
      CHECKOUT_SWEEP_MIN_MICRO: int({ default: DEFAULT_SWEEP_MIN_MICRO, min: 1 }),
    },
    problems,
  );
  if (!parsed.CHECKOUT_ESCROW_PRIVATE_KEY) {
    // Checkout requires its deposit wallet in production: without the key its USDC could never be paid out.
    // Any value counts, a malformed one too (its own problem is not reported without the key).
    if (production && env.CHECKOUT_ESCROW_ADDRESS?.trim()) {
      throw new ConfigError(
        'invalid configuration: CHECKOUT_ESCROW_PRIVATE_KEY: must be set in production when CHECKOUT_ESCROW_ADDRESS is (settlement sweeps the checkout deposit wallet into escrow)',
      );
    }
    return null;
  }
  const address = addressOfPrivateKey(parsed.CHECKOUT_ESCROW_PRIVATE_KEY);
  if (!address) problems.push('CHECKOUT_ESCROW_PRIVATE_KEY: must be a 0x-prefixed 32-byte hex key');
  else if (parsed.CHECKOUT_ESCROW_PRIVATE_KEY.toLowerCase() === escrowPrivateKey.toLowerCase()) {
    problems.push('CHECKOUT_ESCROW_PRIVATE_KEY: must not be the escrow key (a distinct deposit wallet)');
  } else if (parsed.CHECKOUT_ESCROW_ADDRESS && parsed.CHECKOUT_ESCROW_ADDRESS !== address) {
    problems.push('CHECKOUT_ESCROW_ADDRESS: must be the address of CHECKOUT_ESCROW_PRIVATE_KEY');
  }
  throwIfProblems(problems, parsed);
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
