import { Type } from '@sinclair/typebox';
import { Address, Id, IsoTime, NetworkName, Nullable, TxHash, UsdcAmount } from '../primitives';

export const PaymentSource = Type.Union([Type.Literal('x402'), Type.Literal('checkout')]);

/**
 * A payment accepted for something a seller sells. Published by gateway-proxy (source x402) and by checkout
 * (source checkout). The ledger keys it by chainId:txHash:logIndex: one transfer pays for one thing.
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
