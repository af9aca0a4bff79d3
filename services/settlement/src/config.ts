import { addressOfPrivateKey } from '@paygate/chain';
import { parseChainUsdc } from '@paygate/money';
import {
  type ChainConfig,
  type CommonConfig,
  ConfigError,
  chainConfig,
  commonConfig,
  int,
  operatorTokenSpec,
  parseEnv,
  productionGuards,
  str,
  throwIfProblems,
} from '@paygate/runtime';
import { getAddress } from 'ethers';
import { loadRelayerConfig, type RelayerConfig } from './relayer/config';
import {
  type CheckoutSweepConfig,
  type DepositSweepConfig,
  loadCheckoutSweepConfig,
  loadDepositSweepConfig,
} from './sweep/config';

export type CrashPoint = 'after_record' | 'after_broadcast';
const CRASH_POINTS: readonly CrashPoint[] = ['after_record', 'after_broadcast'];

/**
 * `confirmations` (CONFIRMATIONS, default: the network's, 1 on local, 3 on Base): blocks, including the one holding the transaction, before a
 * transfer counts as done. `escrowAddress` defaults to the address of ESCROW_PRIVATE_KEY.
 */
export interface SettlementConfig extends CommonConfig, ChainConfig {
  /** The escrow wallet's signing key. Never logged; settlement is the only service that has it. */
  escrowPrivateKey: string;
  /** How often the scheduler looks for sellers whose settlement period is due. */
  schedulerIntervalMs: number;
  /** How often the transfer worker signs, broadcasts and checks receipts. */
  transferPollIntervalMs: number;
  /** A broadcast transaction without a receipt after this long is rebroadcast (same bytes) and counts as stuck. */
  txTimeoutMs: number;
  /** Timeout of every JSON-RPC call to the chain. */
  rpcTimeoutMs: number;
  /** Timeout of every NATS request to the ledger. */
  ledgerTimeoutMs: number;
  /** Pre-flight (gas estimate) failures before a transfer that was never signed is given up as failed. */
  maxPreflightAttempts: number;
  /**
   * TEST-ONLY crash hook: exits the process with code 137 at that point of a send, so tests can show
   * crash safety. Ignored (always null) when NODE_ENV=production.
   */
  crashPoint: CrashPoint | null;
  /** The x402 relayer (a pool of gas-only keys), or null when neither RELAYER_PRIVATE_KEYS nor RELAYER_PRIVATE_KEY is set. */
  relayer: RelayerConfig | null;
  /** The checkout deposit wallet's sweeper (CHECKOUT_ESCROW_PRIVATE_KEY), or null when not set. */
  checkoutSweep: CheckoutSweepConfig | null;
  /** Session deposit addresses: their key and the sweeper's settings (swept through the relayer). */
  depositSweep: DepositSweepConfig;
  /** Bearer token of the operator routes (POST /api/v1/operator/settlements/run). */
  operatorToken: string;
  /**
   * DEVELOPMENT ONLY (SETTLEMENT_PERIOD_SECONDS): every seller's period is this many seconds instead of its
   * DAILY/WEEKLY/MONTHLY one, so `make dev` pays out within minutes. 0 = the real periods; refused in production.
   */
  settlementPeriodSeconds: number;
  /**
   * MAX_TRANSFER_USDC: no single transfer out of escrow (refund, payout, platform payout) above this is signed,
   * whatever the ledger says; it is refused and reported. Required in production.
   */
  maxTransferUsdc: string;
  /** TREASURY_ADDRESS: where the platform's revenue is paid (operator platform payouts); null = not offered. */
  treasuryAddress: string | null;
}

/** The development default cap; production must choose its own. */
const DEVELOPMENT_MAX_TRANSFER_USDC = '100000';

/** Parses the environment once; throws a ConfigError naming every bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): SettlementConfig {
  const common = commonConfig(env, { serviceName: 'settlement', schema: 'settlement', port: 8086 });
  const parsed = parseEnv(env, {
    // No default: without the key nothing can be paid out, and a default key would be a public one.
    ESCROW_PRIVATE_KEY: str(),
    SCHEDULER_INTERVAL_MS: int({ default: 60_000, min: 1 }),
    TRANSFER_POLL_INTERVAL_MS: int({ default: 1000, min: 1 }),
    TX_TIMEOUT_MS: int({ default: 120_000, min: 1 }),
    LEDGER_TIMEOUT_MS: int({ default: 5000, min: 1 }),
    MAX_PREFLIGHT_ATTEMPTS: int({ default: 20, min: 1 }),
    SETTLEMENT_CRASH_POINT: str({ default: '' }),
    OPERATOR_TOKEN: operatorTokenSpec(common.production),
    SETTLEMENT_PERIOD_SECONDS: int({ default: 0, min: 0, max: 86_400 }),
    MAX_TRANSFER_USDC: str({ default: common.production ? '' : DEVELOPMENT_MAX_TRANSFER_USDC }),
    TREASURY_ADDRESS: str({ default: '' }),
  });
  const problems: string[] = [];
  const escrowAddress = addressOfPrivateKey(parsed.ESCROW_PRIVATE_KEY);
  if (!escrowAddress) problems.push('ESCROW_PRIVATE_KEY: must be a 0x-prefixed 32-byte hex key');
  const periodSeconds = parsed.SETTLEMENT_PERIOD_SECONDS;
  if (periodSeconds > 0 && common.production) {
    problems.push('SETTLEMENT_PERIOD_SECONDS: development only, must not be set in production');
  }
  const transfersOut = transferOutSettings(parsed, problems);
  const crashPoint = crashPointOf(parsed.SETTLEMENT_CRASH_POINT, common.production, problems);
  throwIfProblems(problems);
  const chain = chainConfig(env, {
    rpcTimeoutMs: 10_000,
    escrowAddress,
  });
  productionGuards(env, {
    serviceName: common.serviceName,
    production: common.production,
    escrow: { address: chain.escrowAddress, fromKey: true },
    rpcPolling: {
      url: chain.rpcUrl,
      intervalMs: parsed.TRANSFER_POLL_INTERVAL_MS,
      variable: 'TRANSFER_POLL_INTERVAL_MS',
    },
    secrets: ['OPERATOR_TOKEN'],
    privateKeys: [
      { name: 'ESCROW_PRIVATE_KEY', value: parsed.ESCROW_PRIVATE_KEY },
      { name: 'RELAYER_PRIVATE_KEY', value: env.RELAYER_PRIVATE_KEY },
      ...(env.RELAYER_PRIVATE_KEYS ?? '')
        .split(',')
        .map((value, i) => ({ name: `RELAYER_PRIVATE_KEYS (key ${i + 1})`, value })),
      { name: 'CHECKOUT_ESCROW_PRIVATE_KEY', value: env.CHECKOUT_ESCROW_PRIVATE_KEY },
    ],
  });
  const config = {
    ...common,
    ...chain,
    schedulerIntervalMs: parsed.SCHEDULER_INTERVAL_MS,
    transferPollIntervalMs: parsed.TRANSFER_POLL_INTERVAL_MS,
    txTimeoutMs: parsed.TX_TIMEOUT_MS,
    ledgerTimeoutMs: parsed.LEDGER_TIMEOUT_MS,
    maxPreflightAttempts: parsed.MAX_PREFLIGHT_ATTEMPTS,
    crashPoint,
    relayer: loadRelayerConfig(env, parsed.ESCROW_PRIVATE_KEY),
    checkoutSweep: loadCheckoutSweepConfig(env, parsed.ESCROW_PRIVATE_KEY, common.production),
    depositSweep: loadDepositSweepConfig(env, common.production),
    operatorToken: parsed.OPERATOR_TOKEN,
    settlementPeriodSeconds: periodSeconds,
    ...transfersOut,
  } as SettlementConfig;
  if (common.production && !config.relayer) {
    throw new ConfigError(
      'invalid production configuration of settlement: RELAYER_PRIVATE_KEY: must be set in production (its relayer submits the sweeps of session deposit addresses into escrow)',
    );
  }
  // Not enumerable: a logged or serialised config never shows the key (spreading the config drops it too).
  Object.defineProperty(config, 'escrowPrivateKey', { value: parsed.ESCROW_PRIVATE_KEY, enumerable: false });
  return config;
}

/** MAX_TRANSFER_USDC and TREASURY_ADDRESS: the cap on each transfer out of escrow, and where platform revenue goes. */
function transferOutSettings(
  parsed: { MAX_TRANSFER_USDC: string; TREASURY_ADDRESS: string },
  problems: string[],
): Pick<SettlementConfig, 'maxTransferUsdc' | 'treasuryAddress'> {
  if (!parsed.MAX_TRANSFER_USDC) {
    problems.push(
      'MAX_TRANSFER_USDC: must be set in production (the largest single transfer out of escrow, in USDC)',
    );
  } else {
    try {
      if (parseChainUsdc(parsed.MAX_TRANSFER_USDC) <= 0n)
        problems.push('MAX_TRANSFER_USDC: must be greater than 0');
    } catch {
      problems.push('MAX_TRANSFER_USDC: must be a decimal USDC amount, e.g. 5000');
    }
  }
  let treasuryAddress: string | null = null;
  if (parsed.TREASURY_ADDRESS) {
    try {
      treasuryAddress = getAddress(parsed.TREASURY_ADDRESS);
    } catch {
      treasuryAddress = null;
    }
    if (treasuryAddress === null || /^0x0{40}$/.test(treasuryAddress)) {
      problems.push('TREASURY_ADDRESS: must be a non-zero 0x-prefixed 20-byte address');
      treasuryAddress = null;
    }
  }
  return { maxTransferUsdc: parsed.MAX_TRANSFER_USDC, treasuryAddress };
}

/** SETTLEMENT_CRASH_POINT (crash tests only): where a payout stops as if its process died; never in production. */
function crashPointOf(value: string, production: boolean, problems: string[]): CrashPoint | null {
  if (!value) return null;
  if (!(CRASH_POINTS as readonly string[]).includes(value)) {
    problems.push(`SETTLEMENT_CRASH_POINT: must be one of ${CRASH_POINTS.join(', ')}`);
    return null;
  }
  return production ? null : (value as CrashPoint);
}
