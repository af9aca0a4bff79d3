/** A payment's refusal: the specification's reasons of a 402, then the two 503s (nothing refused, ask again). */
export const PAYMENT_REASONS = {
  wrongNetwork: 'wrong_network',
  wrongToken: 'wrong_token',
  wrongRecipient: 'wrong_recipient',
  insufficientAmount: 'insufficient_amount',
  invalidSignature: 'invalid_signature',
  transferNotFound: 'transfer_not_found',
  transactionFailed: 'transaction_failed',
  insufficientConfirmations: 'insufficient_confirmations',
  paymentAlreadyUsed: 'payment_already_used',
  subscriptionExpired: 'subscription_expired',
  /** 503: the chain RPC did not answer. */
  chainUnavailable: 'chain_unavailable',
  /** 503: the ledger did not answer the claim in time; nothing served. */
  claimUnavailable: 'claim_unavailable',
} as const;
export type PaymentReason = (typeof PAYMENT_REASONS)[keyof typeof PAYMENT_REASONS];

/** The reasons a 402 refusing a payment may carry (the two 503s are error envelopes, docs/api.md "Errors"). */
export const REFUSAL_REASONS: readonly PaymentReason[] = Object.values(PAYMENT_REASONS).filter(
  (reason) => reason !== PAYMENT_REASONS.chainUnavailable && reason !== PAYMENT_REASONS.claimUnavailable,
);

/** The paid call's answers that are not about a payment's validity. */
export const CALL_REASONS = {
  /** 400: the X-402-Payment header cannot be read (its field and rule named). */
  invalidPaymentHeader: 'invalid_payment_header',
  /** 403: the seller refuses this payer. */
  payerBlocked: 'payer_blocked',
  /** 502: the seller's API failed; the payment stays usable within its retry window. */
  upstreamFailed: 'upstream_failed',
} as const;

/** The MCP endpoint's own answers (a tool call's are the paid call's). */
export const MCP_REASONS = {
  /** 503: MCP is off until TRUSTED_PROXIES includes loopback (the tool call's hop to the paid route). */
  unavailable: 'mcp_unavailable',
} as const;

/** x402's sign-in-with-x refusals: the extension's codes word for word (its validation passes more through), then Paygate's. */
export const SIWX_REASONS = {
  payload: 'invalid_siwx_payload',
  domainMismatch: 'invalid_siwx_domain_mismatch',
  chainId: 'invalid_siwx_chain_id',
  nonce: 'invalid_siwx_nonce',
  /** No subscription of the signed-in wallet serves this call. */
  notSubscribed: 'siwx_not_subscribed',
  /** 503: the chain did not answer a contract wallet's signature check. */
  unavailable: 'siwx_unavailable',
} as const;

/** `@x402/evm`'s own invalidReason / errorReason strings (x402-reasons.test.ts checks them), else the x402 spec's. */
export const UPSTREAM_REASONS = {
  // @x402/evm, exact facilitator (EIP-3009)
  scheme: 'invalid_exact_evm_scheme',
  networkMismatch: 'invalid_exact_evm_network_mismatch',
  recipientMismatch: 'invalid_exact_evm_recipient_mismatch',
  signature: 'invalid_exact_evm_signature',
  validBefore: 'invalid_exact_evm_payload_authorization_valid_before',
  validAfter: 'invalid_exact_evm_payload_authorization_valid_after',
  /** v2: the value is not the requirements' amount (v1's facilitator answers `authorizationValue` instead). */
  valueMismatch: 'invalid_exact_evm_payload_authorization_value_mismatch',
  /** v1's value mismatch; Paygate also answers it for a value below its relaying minimum. */
  authorizationValue: 'invalid_exact_evm_authorization_value',
  insufficientBalance: 'invalid_exact_evm_insufficient_balance',
  nonceAlreadyUsed: 'invalid_exact_evm_nonce_already_used',
  simulationFailed: 'invalid_exact_evm_transaction_simulation_failed',
  transactionFailed: 'invalid_exact_evm_transaction_failed',
  /** Broadcast, but not included while the caller waited: present the same payment again. */
  settlementPending: 'settlement_pending',
  // the x402 specification's standard codes (v2 §9), which @x402/evm leaves to the transport
  payload: 'invalid_payload',
  paymentRequirements: 'invalid_payment_requirements',
} as const;

/** Paygate's own, each for a check upstream lacks: USDC only, the 503s (nothing refused), the relayer budgets, the 409s. */
export const PAYGATE_REASONS = {
  assetMismatch: 'invalid_exact_evm_asset_mismatch',
  chainUnavailable: PAYMENT_REASONS.chainUnavailable,
  relayerUnavailable: 'relayer_unavailable',
  settlementInProgress: 'settlement_in_progress',
  claimUnavailable: PAYMENT_REASONS.claimUnavailable,
  relayerDailyLimit: 'relayer_daily_limit',
  paymentIdConflict: 'payment_identifier_conflict',
  paymentIdServed: 'payment_identifier_served',
} as const;

export type X402Reason =
  | (typeof UPSTREAM_REASONS)[keyof typeof UPSTREAM_REASONS]
  | (typeof PAYGATE_REASONS)[keyof typeof PAYGATE_REASONS];

const KNOWN = new Set<string>([...Object.values(UPSTREAM_REASONS), ...Object.values(PAYGATE_REASONS)]);

/** A refused authorization's row keeps the code it got. */
export function isX402Reason(value: string | null | undefined): value is X402Reason {
  return typeof value === 'string' && KNOWN.has(value);
}

export interface X402Refusal {
  reason: X402Reason;
  message: string;
}
