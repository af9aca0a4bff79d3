/**
 * Below the HTTP layer (whose answers are `HttpError`s with a code of reasons.ts): a consumer's handler that throws
 * one is redelivered with backoff, then dead-lettered for an operator; nothing of its transaction is kept.
 */
export class LedgerError extends Error {
  override name = this.constructor.name;
}

/** An event names a record the ledger does not hold (yet): a refund, a settlement's reservation, a payout. */
export class UnknownRecordError extends LedgerError {
  constructor(
    readonly subject: string,
    readonly what: string,
    readonly id: string,
  ) {
    super(`${subject} for unknown ${what} ${id}`);
  }
}

/** A refund was requested for a transfer the ledger has not booked yet (its `transfer.observed` is behind). */
export class TransferNotBookedError extends LedgerError {
  constructor(readonly transferKey: string) {
    super(`refund requested for transfer ${transferKey}, which the ledger has not booked yet`);
  }
}

/** A payout is due before the ledger heard the seller's payout address (its seller.updated is behind). */
export class PayoutAddressUnknownError extends LedgerError {
  constructor(readonly sellerId: string) {
    super(`no payout address known for seller ${sellerId} yet`);
  }
}

/** Settlement reported an outcome other than the reservation: money may have left unreserved; an operator looks. */
export class ReservationMismatchError extends LedgerError {
  constructor(
    readonly subject: string,
    readonly payoutId: string,
    detail: string,
    reservation = 'reservation',
  ) {
    super(`${subject} ${payoutId} does not match its ${reservation} (${detail})`);
  }
}

/** A database answer the ledger's own statements rule out (a claim neither inserted nor found): a defect. */
export class LedgerInvariantError extends LedgerError {}
