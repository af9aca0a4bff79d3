import { Type } from '@sinclair/typebox';
import { Address, Id, IsoTime, NetworkName, Nullable, TxHash, UsdcAmount } from '../primitives';

export const PaymentSource = Type.Union([Type.Literal('x402'), Type.Literal('checkout')]);

/**
 * A payment booked for something a seller sells (source x402: gateway-proxy's claim; checkout: a matched session).
 * Published by escrow-ledger through its outbox in the transaction that claimed the transfer and booked the
 * payment (`ledger.claim_transfer` with its `payment`): a fact for the notifier and the live channel, consumed by
 * nothing that moves money. One transfer (chainId:txHash:logIndex) pays for one thing.
 */
export const PaymentConfirmed = Type.Object(
  {
    paymentId: Id,
    source: PaymentSource,
    sellerId: Id,
    skillId: Nullable(Id),
    skillName: Nullable(Type.String()),
    endpointId: Nullable(Id),
    sessionId: Nullable(Id),
    payer: Address,
    amount: UsdcAmount,
    network: NetworkName,
    chainId: Type.Integer({ minimum: 1 }),
    token: Address,
    txHash: TxHash,
    logIndex: Type.Integer({ minimum: 0 }),
    holdPeriodHours: Type.Integer({ minimum: 0, maximum: 168 }),
    confirmedAt: IsoTime,
  },
  { additionalProperties: false },
);

/** A confirmed payment that no longer stands (its transfer was reorged away). */
export const PaymentReversed = Type.Object(
  {
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
  },
  { additionalProperties: false },
);

/** What the seller's API did to a paid call that failed: a 5xx answer, no answer in time, no connection, no URL. */
export const UpstreamOutcome = Type.Union([
  Type.Literal('error_status'),
  Type.Literal('timeout'),
  Type.Literal('unreachable'),
  Type.Literal('misconfigured'),
]);

/**
 * A paid pay-per-call whose forward to the seller failed: the buyer was answered 5xx and may present the same
 * payment again for the same resource until `retryUntil` (the window starts at the first failure and is not
 * extended). Published once per failed attempt (`attempt` counts the presentations of the payment, from 1), in
 * the transaction that marked the gateway's claim retryable. The gateway's closing pass also publishes it, as a
 * `timeout`, for a call that got no answer in time and never will: left in flight by a replica that died, or paid
 * (settled after its caller stopped waiting) and never presented again, so the seller's API was never called.
 */
export const PaymentCallFailed = Type.Object(
  {
    paymentId: Id,
    sellerId: Id,
    skillId: Nullable(Id),
    attempt: Type.Integer({ minimum: 1 }),
    upstreamOutcome: UpstreamOutcome,
    /** The seller's status for `error_status`; null otherwise. */
    upstreamStatus: Nullable(Type.Integer({ minimum: 500, maximum: 599 })),
    failedAt: IsoTime,
    retryUntil: IsoTime,
  },
  { additionalProperties: false },
);

/**
 * A paid call that failed before (payment.call_failed) was served on a retry within its window. Only published
 * after a failure: a payment is served unless told otherwise, so every other call costs no event.
 */
export const PaymentCallRecovered = Type.Object(
  {
    paymentId: Id,
    sellerId: Id,
    attempt: Type.Integer({ minimum: 1 }),
    upstreamStatus: Type.Integer({ minimum: 100, maximum: 499 }),
    servedAt: IsoTime,
  },
  { additionalProperties: false },
);

/**
 * A paid pay-per-call whose seller failed (payment.call_failed) and whose retry window closed with no attempt
 * served: the gateway will serve nothing more for this payment. Published once per payment, in the transaction
 * that made the claim final (no retry can take it over afterwards). The ledger decides the refund.
 */
export const PaymentCallUnserved = Type.Object(
  {
    paymentId: Id,
    sellerId: Id,
    /** The presentations of the payment the gateway counted. */
    attempts: Type.Integer({ minimum: 1 }),
    retryUntil: IsoTime,
    closedAt: IsoTime,
  },
  { additionalProperties: false },
);
