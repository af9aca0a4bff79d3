import { Type } from '@sinclair/typebox';
import {
  Address,
  ClosedObject,
  Id,
  IsoTime,
  Literals,
  NetworkName,
  Nullable,
  TxHash,
  UsdcAmount,
} from '../primitives';

export const PaymentSource = Literals(['x402', 'checkout']);

/** Whose payment and for what: the same in the claim that books it and in its payment.confirmed. */
export const PaymentFields = {
  /** The same on every repeat of the claim (the gateway derives it from `network:txHash`). */
  paymentId: Id,
  source: PaymentSource,
  sellerId: Id,
  skillId: Nullable(Id),
  skillName: Nullable(Type.String()),
  endpointId: Nullable(Id),
  sessionId: Nullable(Id),
};

/** Booked with its `ledger.claim_transfer`: a fact for the notifier and live channel, moving no money. */
export const PaymentConfirmed = ClosedObject({
  ...PaymentFields,
  payer: Address,
  amount: UsdcAmount,
  network: NetworkName,
  chainId: Type.Integer({ minimum: 1 }),
  token: Address,
  txHash: TxHash,
  logIndex: Type.Integer({ minimum: 0 }),
  holdPeriodHours: Type.Integer({ minimum: 0, maximum: 168 }),
  confirmedAt: IsoTime,
});

export const PaymentReversed = ClosedObject({
  paymentId: Id,
  source: PaymentSource,
  sellerId: Id,
  sessionId: Nullable(Id),
  chainId: Type.Integer({ minimum: 1 }),
  txHash: TxHash,
  logIndex: Type.Integer({ minimum: 0 }),
  amount: UsdcAmount,
  reason: Type.String(),
  reversedAt: IsoTime,
});

export const UpstreamOutcome = Literals(['error_status', 'timeout', 'unreachable', 'misconfigured']);

/**
 * A paid call's forward to the seller failed: the buyer may present the same payment again until `retryUntil`
 * (counted from the first failure, never extended). Once per failed attempt; the gateway's closing pass also
 * publishes a `timeout` for a call left in flight (a dead replica) or paid and never presented again.
 */
export const PaymentCallFailed = ClosedObject({
  paymentId: Id,
  sellerId: Id,
  skillId: Nullable(Id),
  attempt: Type.Integer({ minimum: 1 }),
  upstreamOutcome: UpstreamOutcome,
  upstreamStatus: Nullable(Type.Integer({ minimum: 500, maximum: 599 })),
  failedAt: IsoTime,
  retryUntil: IsoTime,
});

/** A paid call that failed before was served on a retry (only after a failure: served is the default). */
export const PaymentCallRecovered = ClosedObject({
  paymentId: Id,
  sellerId: Id,
  attempt: Type.Integer({ minimum: 1 }),
  upstreamStatus: Type.Integer({ minimum: 100, maximum: 499 }),
  servedAt: IsoTime,
});

/**
 * A failed paid call's retry window closed with no attempt served: once per payment, in the transaction that made
 * the claim final (no retry can take it over after it). The ledger decides the refund.
 */
export const PaymentCallUnserved = ClosedObject({
  paymentId: Id,
  sellerId: Id,
  attempts: Type.Integer({ minimum: 1 }),
  retryUntil: IsoTime,
  closedAt: IsoTime,
});
