import { RECEIPT_HEADER } from '@paygate/protocol';
import { sendJson } from '../../http-util';
import type { SellerFailure } from '../../payments/call-outcomes';
import type { ForwardFailureReason, ForwardResult } from '../../proxy/forward';
import { CALL_REASONS } from '../../reasons';
import { type Call, errorBody, type PaidCallDeps } from './call';
import type { Paid } from './pay';

const FAILURE_STATUS: Record<ForwardFailureReason, number> = {
  timeout: 504,
  unreachable: 502,
  body_too_large: 413,
  body_incomplete: 400,
};

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
    return deps.payments.markServed(claim);
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
  sendJson(
    call.res,
    FAILURE_STATUS[result.reason],
    errorBody(call.requestId, buyerFault ? result.reason : CALL_REASONS.upstreamFailed, result.message, {
      txHash: claim.tx_hash,
      retryUntil: retryUntil?.toISOString() ?? null,
      retry: retryUntil
        ? 'present the same X-402-Payment header again for the same resource before retryUntil'
        : 'your subscription stays valid; call again',
    }),
  );
}
