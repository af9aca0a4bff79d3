import { MoneyFormatError, parseUsdc } from '@paygate/money';
import { int, parseEnv, str, throwIfProblems } from '@paygate/runtime';

/** How the ledger refunds paid calls their seller did not serve (unserved/decide.ts). */
export function unservedRefundConfig(env: NodeJS.ProcessEnv) {
  const parsed = parseEnv(env, {
    // A payer's unserved refunds go back as one escrow transfer once they add up to this, so Paygate never pays the
    // gas of a transfer worth less than it costs. 0.01 USDC, like REFUND_MIN_AMOUNT.
    UNSERVED_REFUND_THRESHOLD: str({ default: '0.01' }),
    // Below the threshold they are sent anyway once the oldest waited this long (one such transfer per payer per period).
    UNSERVED_REFUND_MAX_AGE_MS: int({ default: 86_400_000, min: 1 }),
    UNSERVED_SWEEP_INTERVAL_MS: int({ default: 5_000, min: 1 }),
    // A paid call's payment is released no sooner than this after its claim, so the gateway's report of a failure
    // arrives while the seller's share is held: its UPSTREAM_TIMEOUT_MS (10 s) and a short NATS outage.
    CALL_OUTCOME_WINDOW_MS: int({ default: 30_000, min: 0 }),
  });
  return {
    unservedRefundThresholdMicro: positiveUsdcMicro(
      'UNSERVED_REFUND_THRESHOLD',
      parsed.UNSERVED_REFUND_THRESHOLD,
    ),
    unservedRefundMaxAgeMs: parsed.UNSERVED_REFUND_MAX_AGE_MS,
    unservedSweepIntervalMs: parsed.UNSERVED_SWEEP_INTERVAL_MS,
    callOutcomeWindowMs: parsed.CALL_OUTCOME_WINDOW_MS,
  };
}

/** A USDC amount above 0, in micro-USDC; anything else is a ConfigError naming the variable. */
export function positiveUsdcMicro(name: string, value: string): bigint {
  const problems: string[] = [];
  let amountMicro = 0n;
  try {
    amountMicro = parseUsdc(value);
    if (amountMicro <= 0n) problems.push(`${name}: must be more than 0 USDC`);
  } catch (error) {
    if (!(error instanceof MoneyFormatError)) throw error;
    problems.push(`${name}: ${error.rule}`);
  }
  throwIfProblems(problems);
  return amountMicro;
}
