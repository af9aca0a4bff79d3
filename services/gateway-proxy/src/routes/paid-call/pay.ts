import { HttpError } from '@paygate/http';
import { sendJson } from '../../http-util';
import { isUnavailable } from '../../payments/failures';
import type { PaymentClaim, PresentOutcome, Verified } from '../../payments/service';
import { requestFingerprint } from '../../x402/extensions/payment-identifier';
import { refusalError, settlementHeaders } from '../../x402/server/challenge';
import { paymentRequirements } from '../../x402/server/payment-required';
import { type Call, type PaidCallDeps, sendError, sendUnavailable } from './call';
import { resourceUrlOf, sendPaymentRequired } from './challenge';
import type { Offer } from './offer';
import type { Proof } from './proof';

export interface Paid {
  claim: PaymentClaim;
  answerHeaders: Readonly<Record<string, string>>;
  /** An answer that served the call carries these instead (x402: the settlement with its signed receipt). */
  servedHeaders?: (status: number) => Readonly<Record<string, string>>;
}
export const NO_HEADERS: Readonly<Record<string, string>> = Object.freeze({});

/** A tx-hash proof: verified, then claimed; at once when memory decides it (a subscriber's repeated call). */
export function verifyAndClaim(
  deps: PaidCallDeps,
  offer: Offer,
  call: Call,
  { proof }: Extract<Proof, { kind: 'tx-hash' }>,
): Paid | undefined | Promise<Paid | undefined> {
  const verified = deps.payments.verify(proof, offer.purchase);
  if (!(verified instanceof Promise) && verified.kind === 'decided') {
    return answerOutcome(deps, offer, call, verified.outcome, 0);
  }
  return claimVerified(deps, offer, call, proof, verified);
}

async function claimVerified(
  deps: PaidCallDeps,
  offer: Offer,
  call: Call,
  proof: Extract<Proof, { kind: 'tx-hash' }>['proof'],
  verifying: Verified | Promise<Verified>,
): Promise<Paid | undefined> {
  const verified = await verifying;
  if (verified.kind === 'decided') return answerOutcome(deps, offer, call, verified.outcome, 0);
  const claimStarted = performance.now();
  const outcome = await deps.payments.claim(proof, verified, offer.purchase);
  return answerOutcome(deps, offer, call, outcome, performance.now() - claimStarted);
}

function answerOutcome(
  deps: PaidCallDeps,
  offer: Offer,
  call: Call,
  outcome: PresentOutcome,
  claimMs: number,
): Paid | undefined {
  if (!outcome.ok) {
    const { failure } = outcome;
    deps.metrics.refused.inc({ reason: failure.reason });
    // The 402 docs/api.md fixes ("Invalid payment"), or a 503 envelope when the chain or the ledger is away.
    if (isUnavailable(failure)) sendUnavailable(call, failure.reason, failure.message);
    else
      sendJson(call.res, 402, {
        error: 'Invalid payment',
        reason: failure.reason,
        message: failure.message,
        ...(failure.details ?? {}),
        requirements: paymentRequirements(deps.config, offer.skill, offer.endpoint, offer.resource),
      });
    return undefined;
  }
  deps.metrics.accepted.inc({ mode: offer.skill.mode, fresh: String(outcome.fresh) });
  const paygateMs = performance.now() - call.started - outcome.chainMs;
  const claimTiming = claimMs ? `, claim;dur=${claimMs.toFixed(2)}` : '';
  call.res.setHeader(
    'Server-Timing',
    `chain;dur=${outcome.chainMs.toFixed(2)}, paygate;dur=${paygateMs.toFixed(2)}${claimTiming}`,
  );
  return { claim: outcome.claim, answerHeaders: NO_HEADERS };
}

export async function settleX402(
  deps: PaidCallDeps,
  offer: Offer,
  call: Call,
  { payment, version }: Extract<Proof, { kind: 'x402' }>,
): Promise<Paid | undefined> {
  const outcome = await deps.copies.settle(payment, offer.purchase, version, {
    fingerprint: payment.paymentId ? fingerprintOf(call, offer) : undefined,
  });
  if (!outcome.ok) {
    deps.metrics.refused.inc({ reason: outcome.reason });
    if (outcome.status === 202) answerPending(deps, call, version, payment.authorization.from, outcome);
    else if (outcome.status === 402) sendPaymentRequired(deps, offer, call, outcome.reason, outcome.message);
    else sendError(call, refusalError(call.res, outcome));
    return undefined;
  }
  deps.metrics.accepted.inc({ mode: offer.skill.mode, fresh: String(outcome.fresh) });
  const t = outcome.timings;
  call.res.setHeader(
    'Server-Timing',
    `verify;dur=${t.verificationMs.toFixed(2)}, simulate;dur=${t.simulationMs.toFixed(2)}, submit;dur=${t.submissionMs.toFixed(2)}, include;dur=${t.inclusionMs.toFixed(2)}`,
  );
  const { chainId } = deps.config;
  const settled = { success: true, version, transaction: outcome.txHash, chainId, payer: outcome.payer };
  return {
    claim: outcome.claim,
    answerHeaders: settlementHeaders(settled),
    servedHeaders: (status) =>
      settlementHeaders({
        ...settled,
        extensions: deps.receipts.receiptExtension({
          network: `eip155:${chainId}`,
          resourceUrl: resourceUrlOf(offer, call),
          payer: outcome.payer,
          transaction: outcome.txHash,
          amount: outcome.claim.amount_micro.toString(),
          asset: deps.config.usdcAddress,
          payTo: deps.config.escrowAddress,
          outcome: 'served',
          status,
        }),
      }),
  };
}

/** A block or two on Base. */
const PENDING_RETRY_AFTER_SECONDS = 2;

/** `settlement_pending`: 202 (a 402 would have a client sign twice), x402's SettleResponse in PAYMENT-RESPONSE. */
function answerPending(
  deps: PaidCallDeps,
  call: Call,
  version: 1 | 2,
  payer: string,
  outcome: { reason: string; message: string; transaction?: string },
): void {
  const transaction = outcome.transaction ?? '';
  const { chainId } = deps.config;
  const errorReason = outcome.reason;
  const headers = settlementHeaders({ success: false, transaction, chainId, payer, version, errorReason });
  for (const name in headers) call.res.setHeader(name, headers[name]!);
  call.res.setHeader('Retry-After', String(PENDING_RETRY_AFTER_SECONDS));
  call.res.setHeader('Cache-Control', 'no-store');
  sendError(
    call,
    new HttpError(202, outcome.reason, outcome.message, {
      txHash: transaction,
      retryAfterSeconds: PENDING_RETRY_AFTER_SECONDS,
    }),
  );
}

/** The request a payment identifier names; the body by type and length only (the forward reads it once). */
function fingerprintOf(call: Call, offer: Offer): string {
  const headers = call.req.headers;
  return requestFingerprint([
    'paid-call',
    call.method,
    call.url.name,
    call.url.path,
    call.url.query,
    String(headers['content-type'] ?? ''),
    String(headers['content-length'] ?? ''),
    offer.purchase.resource,
    offer.purchase.priceMicro.toString(),
  ]);
}
