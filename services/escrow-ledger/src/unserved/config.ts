import { MoneyFormatError, parseUsdc } from '@paygate/money';
import { int, parseEnv, str, throwIfProblems } from '@paygate/runtime';

/** How the ledger refunds paid calls their seller did not serve (unserved/decide.ts). */
export interface UnservedRefundConfig {
  /**
   * UNSERVED_REFUND_THRESHOLD: a payer's unserved refunds are sent back as one escrow transfer once they add up to
   * this (micro-USDC), so Paygate never pays the gas of a transfer worth less than it costs.
   */
  unservedRefundThresholdMicro: bigint;
  /**
   * UNSERVED_REFUND_MAX_AGE_MS: a payer's unserved refunds below the threshold are sent anyway once the oldest has
   * waited this long: at most one such transfer per payer per this period.
   */
  unservedRefundMaxAgeMs: number;
  /** UNSERVED_SWEEP_INTERVAL_MS: how often undecided calls are decided again and due refunds sent. */
  unservedSweepIntervalMs: number;
  /**
   * CALL_OUTCOME_WINDOW_MS: a paid call's payment is released no sooner than this after its claim (payments/
   * confirmed.ts, paymentToBook), so the gateway's report of a failed call (within its UPSTREAM_TIMEOUT_MS, then its
   * outbox) arrives while the seller's share is still held. Above the gateway's UPSTREAM_TIMEOUT_MS.
   */
  callOutcomeWindowMs: number;
}

export function unservedRefundConfig(env: NodeJS.ProcessEnv): UnservedRefundConfig {
  const parsed = parseEnv(env, {
    // 0.01 USDC, like REFUND_MIN_AMOUNT: a USDC transfer costs about 0.002 USD of gas on Base.
    UNSERVED_REFUND_THRESHOLD: str({ default: '0.01' }),
    UNSERVED_REFUND_MAX_AGE_MS: int({ default: 86_400_000, min: 1 }),
    UNSERVED_SWEEP_INTERVAL_MS: int({ default: 5_000, min: 1 }),
    // The gateway's UPSTREAM_TIMEOUT_MS default (10 s), and the rest for its outbox through a short NATS outage.
    CALL_OUTCOME_WINDOW_MS: int({ default: 30_000, min: 0 }),
  });
  return {
    unservedRefundThresholdMicro: thresholdMicro(parsed.UNSERVED_REFUND_THRESHOLD),
    unservedRefundMaxAgeMs: parsed.UNSERVED_REFUND_MAX_AGE_MS,
    unservedSweepIntervalMs: parsed.UNSERVED_SWEEP_INTERVAL_MS,
    callOutcomeWindowMs: parsed.CALL_OUTCOME_WINDOW_MS,
  };
}

function thresholdMicro(value: string): bigint {
  try {
    const micro = parseUsdc(value);
    if (micro <= 0n) throwIfProblems(['UNSERVED_REFUND_THRESHOLD: must be more than 0 USDC']);
    return micro;
  } catch (error) {
    if (error instanceof MoneyFormatError) throwIfProblems([`UNSERVED_REFUND_THRESHOLD: ${error.rule}`]);
    throw error;
  }
}
