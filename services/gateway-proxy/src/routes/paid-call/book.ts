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

/** escrow-ledger's public lookup of a paid call's outcome by its payment's transaction. */
export const outcomeUrlOf = (publicBaseUrl: string, txHash: string) =>
  `${publicBaseUrl.replace(/\/$/, '')}/api/v1/transactions/lookup?txHash=${txHash}`;

function sellerFailureOf(result: ForwardResult): SellerFailure | undefined {
  if (result.kind === 'answered') return { outcome: 'error_status', status: result.status };
  if (result.reason === 'timeout' || result.reason === 'unreachable') return { outcome: result.reason };
  return undefined;
}

/** Below 500 the answer is relayed and a pay-per-call spent; a failure keeps the payment usable for a retry. */
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

function retryAdvice(retryUntil: Date | undefined, buyerFault: boolean): string {
  if (!retryUntil) return 'your subscription stays valid; call again';
  const again = 'present the same payment again for the same resource before retryUntil';
  // Only the seller's failure is refunded: a body that could not be forwarded is the buyer's own.
  return buyerFault
    ? `${again}, with a body that can be forwarded`
    : `${again}; if no attempt is served by then, it is refunded to its payer automatically (follow outcomeUrl)`;
}
