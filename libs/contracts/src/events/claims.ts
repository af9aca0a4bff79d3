import { type Static, Type } from '@sinclair/typebox';
import { Address, Literals, TxHash, UsdcAmount } from '../primitives';

/** The payment paths that may claim (spend on one thing) an on-chain transfer. */
export const ClaimedVia = Literals(['x402', 'verify', 'checkout', 'operator_refund']);

export type ClaimedVia = Static<typeof ClaimedVia>;

/** A claim's fields, as the `ledger.claim_transfer` request names them. */
export const TransferClaimFields = {
  chainId: Type.Integer({ minimum: 1 }),
  txHash: TxHash,
  logIndex: Type.Integer({ minimum: 0 }),
  claimedVia: ClaimedVia,
  /** What the transfer pays for, in the payment path's terms (`<network>:<txHash>`, a session id, a transfer id). */
  reference: Type.String({ minLength: 1, maxLength: 160 }),
  /** As the claimant saw them on chain. */
  payer: Address,
  amount: UsdcAmount,
};
