import { Type } from '@sinclair/typebox';
import { Address, Id, IsoTime, Nullable, TxHash, UsdcAmount } from '../primitives';

export const CheckoutSessionStatus = Type.Union([
  Type.Literal('open'),
  Type.Literal('paid'),
  Type.Literal('paid_late'),
  Type.Literal('underpaid'),
  Type.Literal('overpaid'),
  Type.Literal('expired'),
]);

/** The state of a checkout session after a change; every checkout.session_* event carries it. */
export const CheckoutSessionSnapshot = Type.Object(
  {
    sessionId: Id,
    sellerId: Id,
    skillId: Nullable(Id),
    status: CheckoutSessionStatus,
    exactAmount: UsdcAmount,
    paidAmount: Nullable(UsdcAmount),
    walletAddress: Address,
    expiresAt: IsoTime,
    txHash: Nullable(TxHash),
    payer: Nullable(Address),
    updatedAt: IsoTime,
  },
  { additionalProperties: false },
);
