import { DEFAULT_HOLD_HOURS } from '@paygate/contracts';
import {
  ConfigError,
  chainConfig,
  commonConfig,
  int,
  operatorTokenSpec,
  optionalAddress,
  parseEnv,
  productionGuards,
  settingsByName,
  str,
  throwIfProblems,
} from '@paygate/runtime';
import { depositNode } from './sessions/deposit-addresses';

/** Checkout only names the chain (sessions carry network, chain id, USDC and wallet address); it never calls it. */
export type CheckoutConfig = ReturnType<typeof loadConfig>;

/** The dev and test xpub: m/44'/60'/1'/0 of the public anvil mnemonic (no funded account); refused in production. */
export const DEV_DEPOSIT_XPUB =
  'xpub6EFHUEbYV13535ChA9yg5xZTWowwFCmFoWnhLbwkd91xHoirGu89GTZwBSUBnBpFeY5EV2cgof8yuyDnkeGALcD8DgGYJSiQfkxKpunWTX1';

/** The checkout wallet of `make dev` and the tests: anvil's account 7 (libs/testing testWallets.checkoutEscrow). */
export const DEV_CHECKOUT_WALLET = '0x14dC79964da2C08b23698B3D3cc7Ca32193d9955';

/** In production: the checkout wallet set and non-zero, the deposit xpub set and not the test mnemonic's. */
function productionDeposit(env: NodeJS.ProcessEnv, address: string): void {
  const problems: string[] = [];
  if (!env.CHECKOUT_DEPOSIT_XPUB?.trim()) {
    problems.push('CHECKOUT_DEPOSIT_XPUB: must be set in production (the deposit addresses of sessions)');
  } else if (env.CHECKOUT_DEPOSIT_XPUB.trim() === DEV_DEPOSIT_XPUB) {
    problems.push('CHECKOUT_DEPOSIT_XPUB: is derived from the public test mnemonic; anyone could sweep it');
  }
  if (!env.CHECKOUT_ESCROW_ADDRESS?.trim()) {
    problems.push(
      'CHECKOUT_ESCROW_ADDRESS: must be set in production (the checkout wallet sessions are paid to)',
    );
  } else if (/^0x0{40}$/i.test(address)) {
    problems.push('CHECKOUT_ESCROW_ADDRESS: must not be the zero address in production');
  }
  if (problems.length > 0) {
    throw new ConfigError(`invalid production configuration of checkout: ${problems.join('; ')}`);
  }
}

/** The checkout wallet (never the agent escrow, in any environment) and the deposit xpub (a valid one). */
function checkoutWallets(
  parsed: { CHECKOUT_ESCROW_ADDRESS?: string; CHECKOUT_DEPOSIT_XPUB?: string },
  escrowAddress: string,
  problems: string[],
): { checkoutEscrowAddress: string; depositXpub: string } {
  const checkoutEscrowAddress = parsed.CHECKOUT_ESCROW_ADDRESS || DEV_CHECKOUT_WALLET;
  if (checkoutEscrowAddress.toLowerCase() === escrowAddress.toLowerCase()) {
    problems.push('CHECKOUT_ESCROW_ADDRESS: must differ from ESCROW_ADDRESS (the agent escrow)');
  }
  const depositXpub = parsed.CHECKOUT_DEPOSIT_XPUB?.trim() || DEV_DEPOSIT_XPUB;
  try {
    depositNode(depositXpub);
  } catch (error) {
    problems.push(`CHECKOUT_DEPOSIT_XPUB: ${(error as Error).message.split(' (')[0]}`);
  }
  return { checkoutEscrowAddress, depositXpub };
}

/** Parses the environment once; throws a ConfigError naming every bad variable. `now`: tests move time. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, now: () => Date = () => new Date()) {
  const common = commonConfig(env, { serviceName: 'checkout', schema: 'checkout', port: 8083 });
  const { network, chainId, usdcAddress, escrowAddress } = chainConfig(env, {
    rpcTimeoutMs: 10_000,
    // anvil's account 1, the escrow wallet of the local chain (libs/testing testWallets.escrow)
    escrowAddress: '0x70997970C51812dc3A010C7d01b50e0d17dc79C8',
  });
  const problems: string[] = [];
  const parsed = parseEnv(
    env,
    {
      SESSION_TTL_SECONDS: int({ default: 900, min: 1, max: 7 * 86_400 }),
      // After expiry, how long a payment of the exact amount still matches (paid_late).
      LATE_WINDOW_SECONDS: int({ default: 86_400, min: 0, max: 30 * 86_400 }),
      // A session without a skill sells a product or a service: the service's default hold (DEFAULT_HOLD_HOURS).
      DEFAULT_HOLD_PERIOD_HOURS: int({ default: DEFAULT_HOLD_HOURS.Service, min: 0, max: 168 }),
      SWEEP_INTERVAL_MS: int({ default: 1000, min: 10, max: 600_000 }),
      OPERATOR_TOKEN: operatorTokenSpec(common.production),
      PROJECTION_CACHE_TTL_MS: int({ default: 2000, min: 0, max: 60_000 }),
      CHECKOUT_ESCROW_ADDRESS: optionalAddress(),
      CHECKOUT_DEPOSIT_XPUB: str({ default: '' }),
      DEPOSIT_WATCH_GRACE_SECONDS: int({ default: 7 * 86_400, min: 0, max: 90 * 86_400 }),
      SESSION_RATE_LIMIT_PER_KEY: int({ default: 600, min: 1, max: 1_000_000 }),
      SESSION_RATE_LIMIT_PER_CLIENT: int({ default: 120, min: 1, max: 1_000_000 }),
      MAX_OPEN_SESSIONS_PER_SELLER: int({ default: 1000, min: 0, max: 10_000_000 }),
      AMOUNT_SUFFIX_RANGE_MICRO: int({ default: 10_000, min: 2, max: 1_000_000 }),
      // A seller's share of one price's suffixes; past it, its sessions of that price get deposit addresses.
      MAX_AMOUNT_SHARE_PERCENT: int({ default: 10, min: 1, max: 100 }),
    },
    problems,
  );
  const { checkoutEscrowAddress, depositXpub } = checkoutWallets(parsed, escrowAddress, problems);
  throwIfProblems(problems, parsed);
  productionGuards(env, {
    serviceName: common.serviceName,
    production: common.production,
    escrow: { address: escrowAddress },
    secrets: ['OPERATOR_TOKEN'],
  });
  if (common.production) productionDeposit(env, checkoutEscrowAddress);
  // The two wallets' raw values are replaced by what checkoutWallets made of them.
  const { CHECKOUT_ESCROW_ADDRESS: _escrow, CHECKOUT_DEPOSIT_XPUB: _xpub, ...settings } = parsed;
  return {
    ...common,
    ...settingsByName(settings),
    escrowAddress,
    checkoutEscrowAddress,
    network,
    chainId,
    usdcAddress,
    depositXpub,
    now,
  };
}
