import { type Static, Type } from '@sinclair/typebox';
import { Address, TxHash, UsdcAmount } from '../primitives';

/**
 * Who may claim an on-chain transfer, i.e. spend it on one thing: an x402 proof at a paid skill URL (`x402`),
 * the seller middleware's `POST /api/verify` (`verify`), a checkout session (`checkout`), or an operator sending
 * unmatched money back (`operator_refund`).
 */
export const ClaimedVia = Type.Union([
  Type.Literal('x402'),
  Type.Literal('verify'),
  Type.Literal('checkout'),
  Type.Literal('operator_refund'),
]);

export type ClaimedVia = Static<typeof ClaimedVia>;

/** A claim's fields, as the `ledger.claim_transfer` request names them. */
export const TransferClaimFields = {
  chainId: Type.Integer({ minimum: 1 }),
  txHash: TxHash,
  logIndex: Type.Integer({ minimum: 0 }),
  /** The payment path claiming the transfer. */
  claimedVia: ClaimedVia,
  /** What the transfer pays for, in the payment path's terms (`<network>:<txHash>`, a session id, a transfer id). */
  reference: Type.String({ minLength: 1, maxLength: 160 }),
  /** The transfer's sender and amount as the claimant saw them on chain. */
  payer: Address,
  amount: UsdcAmount,
};
