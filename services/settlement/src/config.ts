import { addressOfPrivateKey } from '@paygate/chain';
import { parseChainUsdc } from '@paygate/money';
import {
  ConfigError,
  chainConfig,
  commonConfig,
  int,
  operatorTokenSpec,
  optionalAddress,
  parseEnv,
  productionGuards,
  str,
  throwIfProblems,
} from '@paygate/runtime';
import { loadRelayerConfig } from './relayer/config';
import { withHidden } from './secrets';
import { loadCheckoutSweepConfig, loadDepositSweepConfig } from './sweep/config';

export type CrashPoint = 'after_record' | 'after_broadcast';

/** TEST ONLY: dies as if SIGKILLed, so tests show a restart neither loses nor doubles a transfer. */
export function crashIfConfigured(config: SettlementConfig, point: CrashPoint): void {
  if (config.crashPoint === point) process.exit(137);
}

/** Settlement's settings; each variable's meaning is in the README's configuration table. */
export type SettlementConfig = ReturnType<typeof loadConfig>;

/** Parses the environment once; throws a ConfigError naming every bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env) {
  const common = commonConfig(env, { serviceName: 'settlement', schema: 'settlement', port: 8086 });
  const parsed = parseEnv(env, {
    // No default: without the key nothing can be paid out, and a default key would be a public one.
    ESCROW_PRIVATE_KEY: str(),
    SCHEDULER_INTERVAL_MS: int({ default: 60_000, min: 1 }),
    TRANSFER_POLL_INTERVAL_MS: int({ default: 1000, min: 1 }),
    TX_TIMEOUT_MS: int({ default: 120_000, min: 1 }),
    LEDGER_TIMEOUT_MS: int({ default: 5000, min: 1 }),
    MAX_PREFLIGHT_ATTEMPTS: int({ default: 20, min: 1 }),
    SETTLEMENT_CRASH_POINT: str({ default: '', choices: ['', 'after_record', 'after_broadcast'] }),
    OPERATOR_TOKEN: operatorTokenSpec(common.production),
    SETTLEMENT_PERIOD_SECONDS: int({ default: 0, min: 0, max: 86_400 }),
    // Production must choose its own cap.
    MAX_TRANSFER_USDC: str({ default: common.production ? '' : '100000' }),
    TREASURY_ADDRESS: optionalAddress(),
  });
  const problems: string[] = [];
  const escrowAddress = addressOfPrivateKey(parsed.ESCROW_PRIVATE_KEY);
  if (!escrowAddress) problems.push('ESCROW_PRIVATE_KEY: must be a 0x-prefixed 32-byte hex key');
  if (parsed.SETTLEMENT_PERIOD_SECONDS > 0 && common.production) {
    problems.push('SETTLEMENT_PERIOD_SECONDS: development only, must not be set in production');
  }
  const transfersOut = transferOutSettings(parsed, problems);
  throwIfProblems(problems);
  const chain = chainConfig(env, { rpcTimeoutMs: 10_000, escrowAddress });
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
    privateKeys: privateKeysOf(env, parsed.ESCROW_PRIVATE_KEY),
  });
  const config = {
    ...common,
    ...chain,
    schedulerIntervalMs: parsed.SCHEDULER_INTERVAL_MS,
    transferPollIntervalMs: parsed.TRANSFER_POLL_INTERVAL_MS,
    txTimeoutMs: parsed.TX_TIMEOUT_MS,
    ledgerTimeoutMs: parsed.LEDGER_TIMEOUT_MS,
    maxPreflightAttempts: parsed.MAX_PREFLIGHT_ATTEMPTS,
    // TEST ONLY: never in production.
    crashPoint: common.production ? null : ((parsed.SETTLEMENT_CRASH_POINT || null) as CrashPoint | null),
    relayer: loadRelayerConfig(env, parsed.ESCROW_PRIVATE_KEY),
    checkoutSweep: loadCheckoutSweepConfig(env, parsed.ESCROW_PRIVATE_KEY, common.production),
    depositSweep: loadDepositSweepConfig(env, common.production),
    operatorToken: parsed.OPERATOR_TOKEN,
    settlementPeriodSeconds: parsed.SETTLEMENT_PERIOD_SECONDS,
    ...transfersOut,
  };
  if (common.production && !config.relayer) {
    throw new ConfigError(
      'invalid production configuration of settlement: RELAYER_PRIVATE_KEY: must be set in production (its relayer submits the sweeps of session deposit addresses into escrow)',
    );
  }
  // Settlement is the only service that has it.
  return withHidden(config, { escrowPrivateKey: parsed.ESCROW_PRIVATE_KEY });
}

/** Every private key settlement is given, for the production guards' check against the public test keys. */
function privateKeysOf(env: NodeJS.ProcessEnv, escrowPrivateKey: string) {
  return [
    { name: 'ESCROW_PRIVATE_KEY', value: escrowPrivateKey },
    { name: 'RELAYER_PRIVATE_KEY', value: env.RELAYER_PRIVATE_KEY },
    ...(env.RELAYER_PRIVATE_KEYS ?? '')
      .split(',')
      .map((value, i) => ({ name: `RELAYER_PRIVATE_KEYS (key ${i + 1})`, value })),
    { name: 'CHECKOUT_ESCROW_PRIVATE_KEY', value: env.CHECKOUT_ESCROW_PRIVATE_KEY },
  ];
}

function transferOutSettings(
  parsed: { MAX_TRANSFER_USDC: string; TREASURY_ADDRESS: string },
  problems: string[],
): { maxTransferUsdc: string; treasuryAddress: string | null } {
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
  const zeroTreasury = /^0x0{40}$/.test(parsed.TREASURY_ADDRESS);
  if (zeroTreasury) problems.push('TREASURY_ADDRESS: must be a non-zero 0x-prefixed 20-byte address');
  const treasuryAddress = parsed.TREASURY_ADDRESS && !zeroTreasury ? parsed.TREASURY_ADDRESS : null;
  return { maxTransferUsdc: parsed.MAX_TRANSFER_USDC, treasuryAddress };
}
