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
import { positiveUsdcMicro, unservedRefundConfig } from './unserved/config';

export type EscrowLedgerConfig = ReturnType<typeof loadConfig>;

/** Parses the environment once; throws a ConfigError naming every bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env) {
  const common = commonConfig(env, { serviceName: 'escrow-ledger', schema: 'ledger', port: 8085 });
  const chain = chainConfig(env, { rpcTimeoutMs: 10_000 });
  const parsed = parseEnv(env, {
    OPERATOR_TOKEN: operatorTokenSpec(common.production),
    RELEASE_INTERVAL_MS: int({ default: 5_000, min: 1 }),
    RELEASE_BATCH_SIZE: int({ default: 200, min: 1, max: 1000 }),
    // A due hold of a confirmed transfer is released within this, else an alert; empty: three release intervals.
    RELEASE_BOUND_MS: str({ default: '' }),
    // Claims per claim statement at most, and statements in flight per replica.
    PAYMENT_BATCH_SIZE: int({ default: 200, min: 1, max: 1000 }),
    PAYMENT_CONCURRENCY: int({ default: 2, min: 1, max: 16 }),
    REFUND_REQUESTS_PER_MINUTE: int({ default: 10, min: 1 }),
    // The smallest refund unless it is all that remains: each is an escrow transfer (gas, a place on the escrow's
    // one nonce); 0.01 USDC, like X402_MIN_AMOUNT: below it a refund costs more to send than it gives back.
    REFUND_MIN_AMOUNT: str({ default: '0.01' }),
    // Partial refunds per transaction; after them only all that remains, so at most this + 1 escrow transfers.
    REFUND_MAX_PARTIAL_PER_TRANSACTION: int({ default: 10, min: 1, max: 1000 }),
    // Refunds a seller books (POST /api/v1/refunds, approvals) per minute.
    REFUNDS_PER_MINUTE: int({ default: 30, min: 1 }),
    CHAIN_CHECK_INTERVAL_MS: int({ default: 2_000, min: 1 }),
    // Receipts read per pass at most; the least recently checked first, so all are checked within awaiting/this.
    CHAIN_CHECK_BATCH_SIZE: int({ default: 100, min: 1, max: 1000 }),
    // A payment whose transfer the chain has not confirmed stays held (never paid out), reported this long after
    // booking. 0: never held back (tests without a chain), refused in production: it would pay out unheld money.
    CHAIN_CONFIRM_TIMEOUT_MS: int({ default: 600_000, min: common.production ? 1 : 0 }),
    // How often each replica reconciles for the alerts' gauges (a pass sums every posting); 0: only when asked.
    RECONCILE_INTERVAL_MS: int({ default: 300_000, min: 0 }),
    // The checkout deposit wallet: escrow_asset is the USDC of both wallets, so reconciliation adds its balance.
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
    refundMinAmountMicro: positiveUsdcMicro('REFUND_MIN_AMOUNT', parsed.REFUND_MIN_AMOUNT),
    refundMaxPartialPerTransaction: parsed.REFUND_MAX_PARTIAL_PER_TRANSACTION,
    refundsPerMinute: parsed.REFUNDS_PER_MINUTE,
    chainCheckIntervalMs: parsed.CHAIN_CHECK_INTERVAL_MS,
    chainCheckBatchSize: parsed.CHAIN_CHECK_BATCH_SIZE,
    chainConfirmTimeoutMs: parsed.CHAIN_CONFIRM_TIMEOUT_MS,
    reconcileIntervalMs: parsed.RECONCILE_INTERVAL_MS,
    // The service clock: tests inject one to move time without sleeping.
    now: (): Date => new Date(),
    checkoutEscrowAddress: (parsed.CHECKOUT_ESCROW_ADDRESS || null) as string | null,
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
