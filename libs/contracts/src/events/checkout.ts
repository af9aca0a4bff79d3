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
import { CheckoutMatching } from './registry';

// `refunded`: an operator sent the session's underpaid transfer back to its payer.
export const CheckoutSessionStatus = Literals([
  'open',
  'paid',
  'paid_late',
  'underpaid',
  'overpaid',
  'expired',
  'refunded',
]);

/** A checkout session after a change: every checkout.session_* event's payload and the public session object. */
export const CheckoutSessionSnapshot = ClosedObject({
  sessionId: Id,
  sellerId: Id,
  skillId: Nullable(Id),
  description: Type.String({ maxLength: 500 }),
  status: CheckoutSessionStatus,
  /** The price plus a unique six-decimal suffix (`amount` matching), or exactly the price. */
  exactAmount: UsdcAmount,
  paidAmount: Nullable(UsdcAmount),
  /** The shared checkout wallet (`amount`) or the session's own deposit address (`deposit_address`). */
  walletAddress: Address,
  matching: Type.Optional(CheckoutMatching),
  network: NetworkName,
  chainId: Type.Integer({ minimum: 1 }),
  tokenAddress: Address,
  expiresAt: IsoTime,
  /** Until this time a payment of exactAmount still matches (recorded as paid_late after expiresAt). */
  lateUntil: IsoTime,
  txHash: Nullable(TxHash),
  payer: Nullable(Address),
  createdAt: IsoTime,
  updatedAt: IsoTime,
});

/** A transfer that paid for nothing, sent back; the ledger refuses a `from` or `amount` unlike its books. */
export const TransferRefundRequested = ClosedObject({
  /** One per transfer, stable across redeliveries. */
  refundRequestId: Id,
  transferId: Id,
  chainId: Type.Integer({ minimum: 1 }),
  txHash: TxHash,
  logIndex: Type.Integer({ minimum: 0 }),
  from: Address,
  amount: UsdcAmount,
  reason: Type.String({ minLength: 1, maxLength: 500 }),
  /** The underpaid session the transfer was attached to (no payment was booked). */
  sessionId: Type.Optional(Id),
  requestedAt: IsoTime,
});

/** A session's own deposit address (HD child `derivationIndex`), published before any buyer sees it. */
export const DepositAddressAssigned = ClosedObject({
  sessionId: Id,
  address: Address,
  derivationIndex: Type.Integer({ minimum: 0, maximum: 2_147_483_647 }),
  chainId: Type.Integer({ minimum: 1 }),
  assignedAt: IsoTime,
  watchUntil: IsoTime,
});
