/** An error's short message for a log line or a row's last_error. */
export function describe(error: unknown, limit = 300): string {
  const e = error as { shortMessage?: string; message?: string };
  return String(e?.shortMessage ?? e?.message ?? error).slice(0, limit);
}

/** A consumer's handler that throws one of these is redelivered, then dead-lettered: nothing is sent. */
export class SettlementError extends Error {
  override name = 'SettlementError';
}

/** A ledger decision names a settlement or platform payout settlement does not hold. */
export class UnknownRecordError extends SettlementError {
  override name = 'UnknownRecordError';
  constructor(subject: string, what: string, id: string) {
    super(`${subject} for unknown ${what} ${id}`);
  }
}

/** A refund the ledger booked on another chain than the one this settlement sends on. */
export class WrongChainError extends SettlementError {
  override name = 'WrongChainError';
  constructor(refundId: string, chainId: number, ownChainId: number) {
    super(`refund ${refundId} is for chain ${chainId}; this settlement sends on ${ownChainId}`);
  }
}

/** A refund above MAX_TRANSFER_USDC: never sent, an operator decides. */
export class TransferCapExceededError extends SettlementError {
  override name = 'TransferCapExceededError';
  constructor(refundId: string, amount: string, cap: string) {
    super(`refund ${refundId} of ${amount} USDC is above MAX_TRANSFER_USDC (${cap}); not sent`);
  }
}

/** The escrow wallet's mined balance, less what its unmined transactions owe, does not cover a transfer. */
export class EscrowShortError extends SettlementError {
  override name = 'EscrowShortError';
}

/** A caller's bug: every amount the ledger reserves is positive. */
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

/** The relayer was built without a key to sign with. */
export class RelayerSetupError extends SettlementError {
  override name = 'RelayerSetupError';
}

/** The node answered a block read with no block (a head it just reported, not yet served by this node). */
export class BlockNotFoundError extends SettlementError {
  override name = 'BlockNotFoundError';
}
