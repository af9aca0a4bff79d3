import { Type } from '@sinclair/typebox';
import { Address, ClosedObject, IsoTime, NetworkName, TxHash, UsdcAmount } from '../primitives';

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
export const TransferObserved = ClosedObject({
  ...transferFields,
  confirmations: Type.Integer({ minimum: 1 }),
  observedAt: IsoTime,
});

/** A previously observed transfer whose block left the canonical chain. */
export const TransferReorged = ClosedObject({ ...transferFields, reorgedAt: IsoTime });
