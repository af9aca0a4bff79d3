import { HttpError } from '@paygate/http';
import { RECEIPT_HEADER } from '@paygate/protocol';
import type { SellerFailure } from '../../payments/call-outcomes';
import type { ForwardFailureReason, ForwardResult } from '../../proxy/forward';
import { CALL_REASONS } from '../../reasons';
import { type Call, type PaidCallDeps, sendError } from './call';
import type { Paid } from './pay';

const FAILURE_STATUS: Record<ForwardFailureReason, number> = {
  timeout: 504,
  unreachable: 502,
  body_too_large: 413,
  body_incomplete: 400,
};

/**
 * Where a buyer follows a paid call's outcome by its payment's transaction: retryable, unserved, refund_pending,
 * refunded with the refund's transaction (escrow-ledger's public lookup).
 */
export const outcomeUrlOf = (publicBaseUrl: string, txHash: string) =>
  `${publicBaseUrl.replace(/\/$/, '')}/api/v1/transactions/lookup?txHash=${txHash}`;

/** The seller's part in a failed forward; undefined when the buyer's body could not be forwarded. */
function sellerFailureOf(result: ForwardResult): SellerFailure | undefined {
  if (result.kind === 'answered') return { outcome: 'error_status', status: result.status };
  if (result.reason === 'timeout' || result.reason === 'unreachable') return { outcome: result.reason };
  return undefined;
}

/**
 * What the seller's answer makes of the payment: an answer is relayed with the receipt and a pay-per-call is
 * spent; a failure (5xx, timeout, or a buyer's body that could not be forwarded) keeps it usable for a retry.
 * The seller's books hear of a seller failure (payment.call_failed) and of a retry served after one
 * (payment.call_recovered), each in the transaction that changes the claim.
 */
export function book(
  deps: PaidCallDeps,
  call: Call,
  paid: Paid,
  result: ForwardResult,
): undefined | Promise<void> {
  const { claim, answerHeaders } = paid;
  if (result.kind === 'answered' && result.status < 500) {
    result.relay({
      ...(paid.servedHeaders?.(result.status) ?? answerHeaders),
      [RECEIPT_HEADER]: claim.tx_hash,
    });
    // A claim with a retry window is a retry (or an x402 payment settled after its caller gave up).
    if (claim.retry_until && claim.kind !== 'subscription') {
      return deps.callOutcomes.markServedAgain(claim, result.status);
    }
    return deps.payments.rows.markServed(claim);
  }
  return bookFailure(deps, call, paid, result);
}

/** A failed forward: the claim stays usable for a retry where it may, and the buyer hears why. */
async function bookFailure(
  deps: PaidCallDeps,
  call: Call,
  { claim, answerHeaders }: Paid,
  result: ForwardResult,
): Promise<void> {
  const retryUntil = await deps.callOutcomes.markFailed(claim, sellerFailureOf(result));
  const retryHeaders: Record<string, string> = { ...answerHeaders, [RECEIPT_HEADER]: claim.tx_hash };
  if (retryUntil) retryHeaders['X-402-Retry-Until'] = retryUntil.toISOString();
  if (result.kind === 'answered') {
    result.relay(retryHeaders);
    return;
  }
  for (const [header, value] of Object.entries(retryHeaders)) call.res.setHeader(header, value);
  const buyerFault = result.reason === 'body_too_large' || result.reason === 'body_incomplete';
  sendError(
    call,
    new HttpError(
      FAILURE_STATUS[result.reason],
      buyerFault ? result.reason : CALL_REASONS.upstreamFailed,
      result.message,
      {
        txHash: claim.tx_hash,
        retryUntil: retryUntil?.toISOString() ?? null,
        outcomeUrl: outcomeUrlOf(deps.config.publicBaseUrl, claim.tx_hash),
        retry: retryAdvice(retryUntil, buyerFault),
      },
    ),
  );
}

/** What the buyer of a failed call may do: present the payment again in its window, and what happens after it. */
function retryAdvice(retryUntil: Date | undefined, buyerFault: boolean): string {
  if (!retryUntil) return 'your subscription stays valid; call again';
  const again = 'present the same payment again for the same resource before retryUntil';
  // Only the seller's failure is refunded: a body that could not be forwarded is the buyer's own.
  return buyerFault
    ? `${again}, with a body that can be forwarded`
    : `${again}; if no attempt is served by then, it is refunded to its payer automatically (follow outcomeUrl)`;
}
