import type { Signer } from 'ethers';

/** The payment a buyer refund request names (`logIndex` when one transaction paid several times). */
export type RefundTarget =
  | { transactionId: string }
  | { txHash: string; logIndex?: number }
  | { sessionId: string };

/** What makes a signed request good once, on one chain, for a bounded time; sent beside the signature. */
export interface RefundRequestSigning {
  chainId: number;
  /** 32 hex characters (128 random bits). */
  nonce: string;
  /** ISO 8601 UTC, e.g. 2026-11-25T10:00:00.000Z. */
  expiresAt: string;
}

/** The ledger refuses a later expiresAt. */
export const REFUND_REQUEST_MAX_VALIDITY_MS = 24 * 60 * 60 * 1000;
const DEFAULT_VALIDITY_MS = 60 * 60 * 1000;

/** A fresh nonce and an expiry (an hour ahead by default) for a request on chain `chainId`. */
export function newRefundRequestSigning(
  chainId: number,
  now: Date = new Date(),
  validForMs: number = DEFAULT_VALIDITY_MS,
): RefundRequestSigning {
  // Web Crypto: in Node 20 and in browsers alike (this module is bundled into the checkout widget).
  const bytes = new Uint8Array(16);
  globalThis.crypto.getRandomValues(bytes);
  const nonce = Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
  const validity = Math.min(Math.max(validForMs, 60_000), REFUND_REQUEST_MAX_VALIDITY_MS);
  return { chainId, nonce, expiresAt: new Date(now.getTime() + validity).toISOString() };
}

/**
 * The exact text the payer signs (EIP-191). Chain id, nonce and expiry keep a captured request from being
 * replayed. Changing it breaks every signed request: don't. (`chainId` may be a string only in documentation.)
 */
export function refundRequestMessage(
  target: RefundTarget,
  reason: string,
  signing: Omit<RefundRequestSigning, 'chainId'> & { chainId: number | string },
): string {
  const names =
    'transactionId' in target
      ? [`transaction: ${target.transactionId}`]
      : 'sessionId' in target
        ? [`checkout session: ${target.sessionId}`]
        : [
            `tx: ${target.txHash.toLowerCase()}`,
            ...(target.logIndex === undefined ? [] : [`log index: ${target.logIndex}`]),
          ];
  return [
    'Paygate refund request',
    ...names,
    `chain id: ${signing.chainId}`,
    `nonce: ${signing.nonce}`,
    `expires at: ${signing.expiresAt}`,
    `reason: ${reason}`,
  ].join('\n');
}

export async function signRefundRequest(
  signer: Signer,
  target: RefundTarget,
  reason: string,
  signing: RefundRequestSigning,
): Promise<string> {
  return signer.signMessage(refundRequestMessage(target, reason, signing));
}

export type RefundRequestStatus = 'pending' | 'approved' | 'rejected' | 'completed';

/** A refund request as the ledger answers it (POST and GET /api/v1/refund-requests/:id). */
export interface RefundRequestView {
  /** `rrq_…`, for GET /api/v1/refund-requests/:id. */
  id: string;
  refundRequestId: string;
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
