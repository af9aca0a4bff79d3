import type { Signer } from 'ethers';

/**
 * Buyer refund requests (escrow-ledger `POST /api/v1/refund-requests`), defined once here for the ledger that
 * verifies them and the buyers that sign them: what names the payment, the message the payer signs, and the
 * request's public view.
 *
 * A payment is named by the ledger's `transactionId`, by the on-chain transfer that paid it (`txHash`, plus
 * `logIndex` when one transaction made several payments into escrow), or by the checkout session it paid
 * (`sessionId`).
 */
export type RefundTarget =
  | { transactionId: string }
  | { txHash: string; logIndex?: number }
  | { sessionId: string };

/**
 * The exact text the payer signs (EIP-191 personal_sign), lines joined by "\n", no trailing newline:
 *
 *     Paygate refund request
 *     transaction: <transactionId>        | tx: <txHash, lowercase> [+ "log index: <n>" line] | checkout session: <sessionId>
 *     reason: <reason>
 *
 * Changing it breaks every signed request: don't.
 */
export function refundRequestMessage(target: RefundTarget, reason: string): string {
  const names =
    'transactionId' in target
      ? [`transaction: ${target.transactionId}`]
      : 'sessionId' in target
        ? [`checkout session: ${target.sessionId}`]
        : [
            `tx: ${target.txHash.toLowerCase()}`,
            ...(target.logIndex === undefined ? [] : [`log index: ${target.logIndex}`]),
          ];
  return ['Paygate refund request', ...names, `reason: ${reason}`].join('\n');
}

export async function signRefundRequest(
  signer: Signer,
  target: RefundTarget,
  reason: string,
): Promise<string> {
  return signer.signMessage(refundRequestMessage(target, reason));
}

export type RefundRequestStatus = 'pending' | 'approved' | 'rejected' | 'completed';

/** A refund request as the ledger answers it (POST and GET /api/v1/refund-requests/:id). */
export interface RefundRequestView {
  /** The request's id (`rrq_…`), for GET /api/v1/refund-requests/:id. */
  id: string;
  refundRequestId: string;
  /** The ledger's transaction the request is for, whichever way it was named. */
  transactionId: string;
  reason: string;
  status: RefundRequestStatus;
  refundId: string | null;
  decisionReason: string | null;
  /** The refund booked on approval: `completed` with `refundTxHash` once the USDC is back on chain. */
  refund: { status: 'pending' | 'completed' | 'failed'; amount: string; refundTxHash: string | null } | null;
  createdAt: string;
  decidedAt: string | null;
  completedAt: string | null;
}
