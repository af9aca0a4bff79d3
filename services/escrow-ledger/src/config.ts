import { MoneyFormatError, parseUsdc } from '@paygate/money';
import {
  type ChainConfig,
  type CommonConfig,
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
import { type UnservedRefundConfig, unservedRefundConfig } from './unserved/config';

/**
 * The chain settings serve reconciliation: the escrow wallet (ESCROW_ADDRESS, required) whose on-chain USDC
 * balance the ledger is compared with, and the chain confirmation check: a transfer booked from
 * payment.confirmed before CONFIRMATIONS (x402) is confirmed or reversed by its receipt (chain/confirmation.ts).
 */
export interface EscrowLedgerConfig extends CommonConfig, ChainConfig, UnservedRefundConfig {
  /** Bearer token of the operator routes (conflicts, suspense, reconciliation). */
  operatorToken: string;
  /** How often the release scheduler looks for holds whose period has passed. */
  releaseIntervalMs: number;
  /** Holds released per scheduler transaction. */
  releaseBatchSize: number;
  /**
   * RELEASE_BOUND_MS: a hold past its period whose transfer the chain confirmed is available within this (a release
   * pass at most RELEASE_INTERVAL_MS away, at once after the chain check confirms); one older is reported by the
   * gauge ledger_holds_due_oldest_seconds{waiting="release"} and an error log.
   */
  releaseBoundMs: number;
  /** payment.confirmed events booked per database transaction (one commit for the whole batch). */
  paymentBatchSize: number;
  /** Parallel batches of payment.confirmed (each is its own transaction). */
  paymentConcurrency: number;
  /** Buyers' refund requests (POST /api/v1/refund-requests) per minute per client address. */
  refundRequestsPerMinute: number;
  /**
   * REFUND_MIN_AMOUNT: the smallest refund, in micro-USDC, unless it is all that remains refundable on its
   * transaction. Every refund is an escrow transfer (gas, and a place on the escrow's one nonce ahead of payouts).
   */
  refundMinAmountMicro: bigint;
  /**
   * REFUND_MAX_PARTIAL_PER_TRANSACTION: partial refunds booked per transaction at most; after them only a refund of
   * all that remains is accepted, so a transaction makes at most this + 1 escrow transfers.
   */
  refundMaxPartialPerTransaction: number;
  /** REFUNDS_PER_MINUTE: refunds a seller books (POST /api/v1/refunds, approvals) per minute. */
  refundsPerMinute: number;
  /**
   * How often transfers booked from payment.confirmed and not yet confirmed by the chain (the indexer's
   * observation, or their receipt CONFIRMATIONS deep) are checked by receipt (CHAIN_CHECK_INTERVAL_MS).
   */
  chainCheckIntervalMs: number;
  /**
   * CHAIN_CHECK_BATCH_SIZE: receipts read per pass of that check, at most (one each). Each pass reads the transfers
   * checked least recently, so all are checked within (awaiting / this) passes, whatever the node answers.
   */
  chainCheckBatchSize: number;
  /**
   * CHAIN_CONFIRM_TIMEOUT_MS: a payment whose transfer the chain has not confirmed is held back from release (so
   * from payouts) until it is confirmed; a transfer still unconfirmed this long after it was booked is reported
   * (`ledger_transfers_unconfirmed_overdue`, an error log) for an operator, and stays held. 0: never held back
   * (tests and tools without a chain; the check still reverses).
   */
  chainConfirmTimeoutMs: number;
  /**
   * RECONCILE_INTERVAL_MS: how often each replica reconciles with the chain by itself (what
   * GET /api/v1/reconciliation does), for the ledger_reconciliation_* and ledger_*_micro_usdc gauges the alerts
   * read. 0: only when an operator asks. Each pass sums every account's postings, so not much more often.
   */
  reconcileIntervalMs: number;
  /** The service clock: tests inject one to move time without sleeping. */
  now: () => Date;
  /**
   * CHECKOUT_ESCROW_ADDRESS (optional): the checkout deposit wallet. escrow_asset is the USDC of both wallets,
   * so reconciliation adds its balance to the escrow wallet's.
   */
  checkoutEscrowAddress: string | null;
}

/** Parses the environment once; throws a ConfigError naming every bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): EscrowLedgerConfig {
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
    // 0.01 USDC, like X402_MIN_AMOUNT: one USDC transfer costs about 0.002 USD of gas on Base; below this a refund
    // costs Paygate more to send than it gives back (all that remains of a smaller payment is still refundable).
    REFUND_MIN_AMOUNT: str({ default: '0.01' }),
    REFUND_MAX_PARTIAL_PER_TRANSACTION: int({ default: 10, min: 1, max: 1000 }),
    REFUNDS_PER_MINUTE: int({ default: 30, min: 1 }),
    CHAIN_CHECK_INTERVAL_MS: int({ default: 2_000, min: 1 }),
    CHAIN_CHECK_BATCH_SIZE: int({ default: 100, min: 1, max: 1000 }),
    // 0: a payment booked before the chain confirmed it is never held back from release (tests without a chain);
    // refused in production, where it would pay out money the chain may not hold.
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
    refundMinAmountMicro: refundMinAmountMicro(parsed.REFUND_MIN_AMOUNT),
    refundMaxPartialPerTransaction: parsed.REFUND_MAX_PARTIAL_PER_TRANSACTION,
    refundsPerMinute: parsed.REFUNDS_PER_MINUTE,
    chainCheckIntervalMs: parsed.CHAIN_CHECK_INTERVAL_MS,
    chainCheckBatchSize: parsed.CHAIN_CHECK_BATCH_SIZE,
    chainConfirmTimeoutMs: parsed.CHAIN_CONFIRM_TIMEOUT_MS,
    reconcileIntervalMs: parsed.RECONCILE_INTERVAL_MS,
    now: () => new Date(),
    checkoutEscrowAddress: parsed.CHECKOUT_ESCROW_ADDRESS || null,
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

/** REFUND_MIN_AMOUNT: a USDC amount above 0, in micro-USDC; anything else is a ConfigError naming it. */
function refundMinAmountMicro(value: string): bigint {
  const problems: string[] = [];
  let amountMicro = 0n;
  try {
    amountMicro = parseUsdc(value);
    if (amountMicro <= 0n) problems.push('REFUND_MIN_AMOUNT: must be more than 0 USDC');
  } catch (error) {
    if (!(error instanceof MoneyFormatError)) throw error;
    problems.push(`REFUND_MIN_AMOUNT: ${error.rule}`);
  }
  throwIfProblems(problems);
  return amountMicro;
}
