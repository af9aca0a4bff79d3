import { PAYMENT_REASONS, type PaymentReason } from '../reasons';

export interface PaymentFailure {
  reason: PaymentReason;
  message: string;
  details?: Record<string, unknown>;
}

export const failure = (
  reason: PaymentFailure['reason'],
  message: string,
  details?: Record<string, unknown>,
): PaymentFailure => ({ reason, message, ...(details ? { details } : {}) });

/** Refusals that say "try again shortly" (503 + Retry-After) rather than "this payment is not good" (402). */
export const isUnavailable = (f: PaymentFailure): boolean =>
  f.reason === PAYMENT_REASONS.chainUnavailable || f.reason === PAYMENT_REASONS.claimUnavailable;
