/** Why a payment was refused: a stable machine-readable reason, a sentence for people, optional details. */
export interface PaymentFailure {
  reason:
    | 'wrong_network'
    | 'wrong_token'
    | 'wrong_recipient'
    | 'insufficient_amount'
    | 'invalid_signature'
    | 'transfer_not_found'
    | 'transaction_failed'
    | 'insufficient_confirmations'
    | 'payment_already_used'
    | 'subscription_expired'
    | 'chain_unavailable'
    /** The ledger did not answer the claim in time: 503, nothing served. */
    | 'claim_unavailable';
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
  f.reason === 'chain_unavailable' || f.reason === 'claim_unavailable';
