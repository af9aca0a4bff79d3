import { MoneyFormatError, parseUsdc } from '@paygate/money';
import {
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

/** The service's settings; README.md's configuration table says what each variable means. */
export type EscrowLedgerConfig = ReturnType<typeof loadConfig>;

/** Parses the environment once; throws a ConfigError naming every bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env) {
  const common = commonConfig(env, { serviceName: 'escrow-ledger', schema: 'ledger', port: 8085 });
  const chain = chainConfig(env, { rpcTimeoutMs: 10_000 });
  const parsed = parseEnv(env, {
    OPERATOR_TOKEN: operatorTokenSpec(common.production),
    RELEASE_INTERVAL_MS: int({ default: 5_000, min: 1 }),
    RELEASE_BATCH_SIZE: int({ default: 200, min: 1, max: 1000 }),
    // Empty: three release intervals (15 s at the default), room for a pass that runs long on a loaded machine.
    RELEASE_BOUND_MS: str({ default: '' }),
    PAYMENT_BATCH_SIZE: int({ default: 200, min: 1, max: 1000 }),
    PAYMENT_CONCURRENCY: int({ default: 2, min: 1, max: 16 }),
    REFUND_REQUESTS_PER_MINUTE: int({ default: 10, min: 1 }),
    // 0.01 USDC: one USDC transfer costs about 0.002 USD of gas on Base; below this a refund costs more than it gives.
    REFUND_MIN_AMOUNT: str({ default: '0.01' }),
    REFUND_MAX_PARTIAL_PER_TRANSACTION: int({ default: 10, min: 1, max: 1000 }),
    REFUNDS_PER_MINUTE: int({ default: 30, min: 1 }),
    CHAIN_CHECK_INTERVAL_MS: int({ default: 2_000, min: 1 }),
    CHAIN_CHECK_BATCH_SIZE: int({ default: 100, min: 1, max: 1000 }),
    // 0 (tests without a chain) is refused in production, where it would pay out money the chain may not hold.
    CHAIN_CONFIRM_TIMEOUT_MS: int({ default: 600_000, min: common.production ? 1 : 0 }),
    RECONCILE_INTERVAL_MS: int({ default: 300_000, min: 0 }),
    CHECKOUT_ESCROW_ADDRESS: optionalAddress(),
  });
  productionGuards(env, {
    serviceName: common.serviceName,
    production: common.production,
    escrow: { address: chain.escrowAddress },
    secrets: ['OPERATOR_TOKEN'],
    checkoutWallet: true,
  });
  return {
    ...common,
    ...chain,
    ...unservedRefundConfig(env),
    operatorToken: parsed.OPERATOR_TOKEN,
    releaseIntervalMs: parsed.RELEASE_INTERVAL_MS,
    releaseBatchSize: parsed.RELEASE_BATCH_SIZE,
    releaseBoundMs: releaseBoundMs(parsed.RELEASE_BOUND_MS, parsed.RELEASE_INTERVAL_MS),
    paymentBatchSize: parsed.PAYMENT_BATCH_SIZE,
    paymentConcurrency: parsed.PAYMENT_CONCURRENCY,
    refundRequestsPerMinute: parsed.REFUND_REQUESTS_PER_MINUTE,
    refundMinAmountMicro: positiveUsdc('REFUND_MIN_AMOUNT', parsed.REFUND_MIN_AMOUNT),
    refundMaxPartialPerTransaction: parsed.REFUND_MAX_PARTIAL_PER_TRANSACTION,
    refundsPerMinute: parsed.REFUNDS_PER_MINUTE,
    chainCheckIntervalMs: parsed.CHAIN_CHECK_INTERVAL_MS,
    chainCheckBatchSize: parsed.CHAIN_CHECK_BATCH_SIZE,
    chainConfirmTimeoutMs: parsed.CHAIN_CONFIRM_TIMEOUT_MS,
    reconcileIntervalMs: parsed.RECONCILE_INTERVAL_MS,
    // The service clock: tests inject one to move time without sleeping.
    now: () => new Date(),
    checkoutEscrowAddress: parsed.CHECKOUT_ESCROW_ADDRESS || null,
  };
}

/** How the ledger refunds paid calls their seller did not serve (unserved/decide.ts). */
export function unservedRefundConfig(env: NodeJS.ProcessEnv) {
  const parsed = parseEnv(env, {
    UNSERVED_REFUND_THRESHOLD: str({ default: '0.01' }),
    UNSERVED_REFUND_MAX_AGE_MS: int({ default: 86_400_000, min: 1 }),
    UNSERVED_SWEEP_INTERVAL_MS: int({ default: 5_000, min: 1 }),
  });
  return {
    unservedRefundThresholdMicro: positiveUsdc('UNSERVED_REFUND_THRESHOLD', parsed.UNSERVED_REFUND_THRESHOLD),
    unservedRefundMaxAgeMs: parsed.UNSERVED_REFUND_MAX_AGE_MS,
    unservedSweepIntervalMs: parsed.UNSERVED_SWEEP_INTERVAL_MS,
  };
}

/** RELEASE_BOUND_MS: milliseconds above RELEASE_INTERVAL_MS (a pass runs that often), 3 intervals when empty. */
function releaseBoundMs(value: string, intervalMs: number): number {
  if (value === '') return 3 * intervalMs;
  const boundMs = Number(value);
  if (!Number.isSafeInteger(boundMs) || boundMs <= intervalMs) {
    throwIfProblems(['RELEASE_BOUND_MS: must be an integer of milliseconds above RELEASE_INTERVAL_MS']);
  }
  return boundMs;
}

/** A USDC amount above 0, in micro-USDC; anything else is a ConfigError naming the variable. */
function positiveUsdc(name: string, value: string): bigint {
  let amountMicro = 0n;
  try {
    amountMicro = parseUsdc(value);
  } catch (error) {
    if (!(error instanceof MoneyFormatError)) throw error;
    throwIfProblems([`${name}: ${error.rule}`]);
  }
  if (amountMicro <= 0n) throwIfProblems([`${name}: must be more than 0 USDC`]);
  return amountMicro;
}
