import {
  type IdempotentAnswer,
  idempotencyKeyParameter,
  rateLimitMiddleware,
  type SharedRateLimiter,
  sendIdempotentAnswer,
} from '@paygate/http';
import type { SellerAuth } from '@paygate/seller-auth';
import type { Request, RequestHandler, Response } from 'express';
import type { LedgerTrx } from '../db';
import type { LedgerContext, LedgerDeps } from '../deps';
import { withIdempotency } from '../idempotency';

/** What the refund routes are built from: the service, the ledger's dependencies and the seller API key check. */
export interface RefundRouteContext {
  ctx: LedgerContext;
  deps: LedgerDeps;
  seller: { scheme: string; middleware: ReturnType<SellerAuth['middleware']> };
  /** Counts a refund a seller books (REFUNDS_PER_MINUTE per seller); run after the API key check. */
  refundRateLimit: RequestHandler;
}

/**
 * Refunds booked per seller per minute: each is an escrow transfer on the escrow's one nonce, so one seller may not
 * queue them ahead of everyone's payouts. Counted in Postgres on every hit, before the refund is decided.
 */
export function refundRateLimit(limiter: SharedRateLimiter): RequestHandler {
  return rateLimitMiddleware(
    limiter,
    (req) => (req.seller ? `refund:${req.seller.sellerId}` : undefined),
    'refunds per minute per seller (REFUNDS_PER_MINUTE)',
  );
}

export const REFUND_RATE_LIMIT_ERROR =
  'rate_limited: REFUNDS_PER_MINUTE refunds this minute by this seller, counting every attempt (Retry-After)';

export const sellerOf = (req: { seller?: { sellerId: string } }) => req.seller!.sellerId;

/** A seller's write, at most once per Idempotency-Key; `retryConflicts`: a deadlock runs it again, not a 500. */
export async function sendSellerWrite(
  ctx: LedgerContext,
  req: { seller?: { sellerId: string } },
  res: Response,
  write: (trx: LedgerTrx, sellerId: string) => Promise<IdempotentAnswer>,
  options?: { retryConflicts?: boolean },
): Promise<void> {
  const sellerId = sellerOf(req);
  const response = await ctx.inTransaction(
    // withIdempotency reads the express request (method, route, params, body, Idempotency-Key).
    (trx) => withIdempotency(trx, req as Request, sellerId, () => write(trx, sellerId)),
    options,
  );
  sendIdempotentAnswer(res, response);
}

export const idempotencyKey = idempotencyKeyParameter(
  'Per seller: the same key with the same request answers the stored response (nothing is booked twice; header Idempotent-Replayed: true); the same key with another request is 409 idempotency_key_reused.',
);

export const FEE_RULE =
  'Fee rule: a refund is split like the payment: the seller bears 95% and the platform returns its 5% fee in proportion. ' +
  'The split is cumulative (seller part = floor(total refunded x 95%) - what the seller already bore), so partial refunds add up exactly to the original shares. ' +
  'While the payment is held (phase in_escrow) both parts come out of the holds: the refund is instant and nothing is owed. ' +
  'After release (available, settling or settled; phase after_release) the seller part is debited from the seller balance and the platform part from platform revenue. ' +
  'Escrow is shared: a refund is paid only from what the seller still has with Paygate (held + available, plus any credit an operator granted); the available balance may go negative (owed, recovered from later settlements) only while held money covers it, otherwise 409 insufficient_seller_balance names available, held, creditLimit and shortfall. ' +
  'The USDC is sent back to the payer wallet by settlement (refund.initiated -> refund.completed with refundTxHash); the refund is pending until then.';
