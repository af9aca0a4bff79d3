import { addressOfPrivateKey } from '@paygate/chain';
import { ConfigError, int, optionalAddress, parseEnv, str, throwIfProblems } from '@paygate/runtime';
import { HDNodeWallet, Mnemonic } from 'ethers';
import { withHidden } from '../secrets';

/** The old shared checkout wallet (CHECKOUT_ESCROW_*), swept whole into escrow. */
export type CheckoutSweepConfig = NonNullable<ReturnType<typeof loadCheckoutSweepConfig>>;
/** The session deposit addresses' key (checkout holds only its xpub) and the sweeper's settings. */
export type DepositSweepConfig = ReturnType<typeof loadDepositSweepConfig>;

/** The sweep settings both sweepers read. */
const SWEEP_SPECS = {
  // Well inside the transfer worker's pre-flight retries: a refund right after a checkout payment finds its USDC.
  CHECKOUT_SWEEP_INTERVAL_MS: int({ default: 5000, min: 100 }),
  // 0.01 USDC: below it a sweep's gas would be a noticeable share; dust waits for more.
  CHECKOUT_SWEEP_MIN_MICRO: int({ default: 10_000, min: 1 }),
};

/** The public anvil/Hardhat mnemonic (`make dev`, tests); never production. */
const DEV_DEPOSIT_MNEMONIC = 'test test test test test test test test test test test junk';
/** Account 1': none of its children is one of anvil's funded accounts (account 0'). */
const DEFAULT_DEPOSIT_PATH = "m/44'/60'/1'/0";

export function loadDepositSweepConfig(env: NodeJS.ProcessEnv, production: boolean) {
  const problems: string[] = [];
  const parsed = parseEnv(
    env,
    {
      CHECKOUT_DEPOSIT_MNEMONIC: str({ default: '' }),
      CHECKOUT_DEPOSIT_XPRV: str({ default: '' }),
      CHECKOUT_DEPOSIT_PATH: str({ default: DEFAULT_DEPOSIT_PATH }),
      ...SWEEP_SPECS,
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
    /** Must equal checkout's CHECKOUT_DEPOSIT_XPUB. */
    xpub: node!.neuter().extendedKey,
    intervalMs: parsed.CHECKOUT_SWEEP_INTERVAL_MS,
    minAmountMicro: BigInt(parsed.CHECKOUT_SWEEP_MIN_MICRO),
    batchSize: parsed.CHECKOUT_SWEEP_BATCH,
    validitySeconds: parsed.CHECKOUT_SWEEP_VALIDITY_SECONDS,
  };
  return withHidden(config, {
    /** The private node whose children are the deposit addresses. */
    node: node!,
    toJSON: () => ({ ...config, minAmountMicro: config.minAmountMicro.toString() }),
  });
}

export function loadCheckoutSweepConfig(
  env: NodeJS.ProcessEnv,
  escrowPrivateKey: string,
  production: boolean,
) {
  // Bad settings are reported with the key's problems below, and only when the key is set.
  const problems: string[] = [];
  const parsed = parseEnv(
    env,
    {
      CHECKOUT_ESCROW_PRIVATE_KEY: str({ default: '' }),
      CHECKOUT_ESCROW_ADDRESS: optionalAddress(),
      ...SWEEP_SPECS,
    },
    problems,
  );
  if (!parsed.CHECKOUT_ESCROW_PRIVATE_KEY) {
    // Without the key the wallet's USDC could never be paid out (any address value counts).
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
  };
  return withHidden(config, { privateKey: parsed.CHECKOUT_ESCROW_PRIVATE_KEY });
}
