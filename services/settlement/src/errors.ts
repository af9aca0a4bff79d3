/**
 * Settlement's errors. Answers to a caller are `HttpError`s (libs/http) with a code of reasons.ts; below the HTTP
 * layer one base, `SettlementError`, and a named subclass per situation. A consumer's handler that throws one is
 * redelivered with backoff, then parked on the dead-letter subject for an operator: nothing is sent.
 */
export class SettlementError extends Error {
  override name = 'SettlementError';
}

/** A ledger decision names a settlement or platform payout settlement does not hold. */
export class UnknownRecordError extends SettlementError {
  override name = 'UnknownRecordError';
  constructor(
    readonly subject: string,
    readonly what: string,
    readonly id: string,
  ) {
    super(`${subject} for unknown ${what} ${id}`);
  }
}

/** A refund the ledger booked on another chain than the one this settlement sends on. */
export class WrongChainError extends SettlementError {
  override name = 'WrongChainError';
  constructor(
    readonly refundId: string,
    readonly chainId: number,
    readonly ownChainId: number,
  ) {
    super(`refund ${refundId} is for chain ${chainId}; this settlement sends on ${ownChainId}`);
  }
}

/** A refund above MAX_TRANSFER_USDC: never sent, an operator decides. */
export class TransferCapExceededError extends SettlementError {
  override name = 'TransferCapExceededError';
  constructor(
    readonly refundId: string,
    readonly amount: string,
    readonly cap: string,
  ) {
    super(`refund ${refundId} of ${amount} USDC is above MAX_TRANSFER_USDC (${cap}); not sent`);
  }
}

/** The escrow wallet's mined balance, less what its unmined transactions owe, does not cover a transfer. */
export class EscrowShortError extends SettlementError {
  override name = 'EscrowShortError';
}

/** A transfer of zero or less was to be recorded (a caller's bug: every amount the ledger reserves is positive). */
export class NonPositiveTransferError extends SettlementError {
  override name = 'NonPositiveTransferError';
  constructor() {
    super('a transfer amount must be positive');
  }
}

/** The settle-now CLI was given arguments it does not take, or settlement refused its request. */
export class SettleCliError extends SettlementError {
  override name = 'SettleCliError';
}
