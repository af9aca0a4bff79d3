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
    | 'chain_unavailable';
  message: string;
  details?: Record<string, unknown>;
}

export const failure = (
  reason: PaymentFailure['reason'],
  message: string,
  details?: Record<string, unknown>,
): PaymentFailure => ({ reason, message, ...(details ? { details } : {}) });
