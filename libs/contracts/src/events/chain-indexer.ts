import { Type } from '@sinclair/typebox';
import { Address, IsoTime, NetworkName, TxHash, UsdcAmount } from '../primitives';

const transferFields = {
  chainId: Type.Integer({ minimum: 1 }),
  network: NetworkName,
  txHash: TxHash,
  logIndex: Type.Integer({ minimum: 0 }),
  blockNumber: Type.Integer({ minimum: 0 }),
  blockHash: TxHash,
  from: Address,
  /** The receiving wallet (escrow or checkout deposit wallet): it decides which purchases the transfer can pay. */
  to: Address,
  token: Address,
  amount: UsdcAmount,
};

/** A USDC Transfer into a Paygate wallet that has reached the configured confirmations. */
export const TransferObserved = Type.Object(
  { ...transferFields, confirmations: Type.Integer({ minimum: 1 }), observedAt: IsoTime },
  { additionalProperties: false },
);

/** A previously observed transfer whose block left the canonical chain. */
export const TransferReorged = Type.Object(
  { ...transferFields, reorgedAt: IsoTime },
  { additionalProperties: false },
);
