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
  /**
   * The Paygate wallet that received it: the agent escrow (ESCROW_ADDRESS, 402 payments) or the checkout
   * deposit wallet (CHECKOUT_ESCROW_ADDRESS, checkout sessions). Consumers decide by it which purchases the
   * transfer can pay: checkout matches only transfers to its deposit wallet, the gateway only the escrow's.
   */
  to: Address,
  token: Address,
  amount: UsdcAmount,
};

/** A USDC Transfer into the escrow or the checkout deposit wallet (`to` says which) that has reached the configured confirmations. */
export const TransferObserved = Type.Object(
  { ...transferFields, confirmations: Type.Integer({ minimum: 1 }), observedAt: IsoTime },
  { additionalProperties: false },
);

/** A previously observed transfer whose block left the canonical chain. */
export const TransferReorged = Type.Object(
  { ...transferFields, reorgedAt: IsoTime },
  { additionalProperties: false },
);
