import { HttpError } from '@paygate/http';
import { encodeX402Header, settlementResponse, X402_HEADERS } from '@paygate/protocol';
import { sendJson } from '../../http-util';
import { isUnavailable, type PaymentFailure } from '../../payments/failures';
import type { PaymentClaim, PresentOutcome, Verified } from '../../payments/service';
import { requestFingerprint } from '../../x402/extensions/payment-identifier';
import { settlementHeaders } from '../../x402/server/challenge';
import { type PaymentRequirementsBody, paymentRequirements } from '../../x402/server/payment-required';
import { type Call, type PaidCallDeps, sendError } from './call';
import { resourceUrlOf, sendPaymentRequired } from './challenge';
import type { Offer } from './offer';
import type { Proof } from './proof';

/** A claimed payment, and the headers its answer carries whatever it is (x402's settlement header). */
export interface Paid {
  claim: PaymentClaim;
  answerHeaders: Readonly<Record<string, string>>;
  /**
   * The headers of an answer that served the call (x402: the settlement header with offer-receipt's signed
   * receipt naming the outcome and the seller's status), instead of `answerHeaders`.
   */
  servedHeaders?: (status: number) => Readonly<Record<string, string>>;
}
const NO_HEADERS: Readonly<Record<string, string>> = Object.freeze({});

/**
 * A tx-hash proof (Paygate's own scheme): verified (signature, fields, on chain), then its transfer claimed. At
 * once when memory decides it (a subscriber's repeated call), else once verified and claimed.
 */
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

/** The payment's outcome: refused (402, or 503 when unavailable) or accepted with its Server-Timing. */
function answerOutcome(
  deps: PaidCallDeps,
  offer: Offer,
  call: Call,
  outcome: PresentOutcome,
  claimMs: number,
): Paid | undefined {
  if (!outcome.ok) {
    deps.metrics.refused.inc({ reason: outcome.failure.reason });
    refuse(
      call,
      outcome.failure,
      paymentRequirements(deps.config, offer.skill, offer.endpoint, offer.resource),
    );
    return undefined;
  }
  deps.metrics.accepted.inc({ mode: offer.skill.mode, fresh: String(outcome.fresh) });
  const paygateMs = performance.now() - call.started - outcome.chainMs;
  call.res.setHeader(
    'Server-Timing',
    claimMs
      ? `chain;dur=${outcome.chainMs.toFixed(2)}, paygate;dur=${paygateMs.toFixed(2)}, claim;dur=${claimMs.toFixed(2)}`
      : `chain;dur=${outcome.chainMs.toFixed(2)}, paygate;dur=${paygateMs.toFixed(2)}`,
  );
  return { claim: outcome.claim, answerHeaders: NO_HEADERS };
}

/**
 * A refused proof is the 402 whose body docs/api.md fixes ("Invalid payment", its reason and the requirements
 * again); a proof that could not be checked now (the chain or the ledger away) is libs/http's envelope of a 503.
 */
function refuse(call: Call, failure: PaymentFailure, requirements: PaymentRequirementsBody) {
  if (isUnavailable(failure)) {
    call.res.setHeader('Retry-After', '2');
    sendError(call, new HttpError(503, failure.reason, failure.message));
    return;
  }
  sendJson(call.res, 402, {
    error: 'Invalid payment',
    reason: failure.reason,
    message: failure.message,
    ...(failure.details ?? {}),
    requirements,
  });
}

/** An x402 payment (the standard exact scheme): verified, submitted by the relayer and claimed once included. */
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
    if (outcome.status === 202) {
      answerPending(deps, call, version, payment.authorization.from, outcome);
      return undefined;
    }
    if (outcome.status === 402) {
      sendPaymentRequired(deps, offer, call, 402, outcome.reason, outcome.message);
      return undefined;
    }
    // 409, 429 and 503 are libs/http's envelope; a 429 or 503 says when to present the payment again.
    const retryAfterSeconds =
      outcome.status === 429 ? (outcome.retryAfterSeconds ?? 60) : outcome.status === 503 ? 2 : undefined;
    if (retryAfterSeconds !== undefined) call.res.setHeader('Retry-After', String(retryAfterSeconds));
    const details = outcome.status === 429 ? { retryAfterSeconds } : {};
    sendError(call, new HttpError(outcome.status, outcome.reason, outcome.message, details));
    return undefined;
  }
  deps.metrics.accepted.inc({ mode: offer.skill.mode, fresh: String(outcome.fresh) });
  const t = outcome.timings;
  call.res.setHeader(
    'Server-Timing',
    `verify;dur=${t.verificationMs.toFixed(2)}, simulate;dur=${t.simulationMs.toFixed(2)}, submit;dur=${t.submissionMs.toFixed(2)}, include;dur=${t.inclusionMs.toFixed(2)}`,
  );
  const settled = { version, txHash: outcome.txHash, chainId: deps.config.chainId, payer: outcome.payer };
  return {
    claim: outcome.claim,
    answerHeaders: settlementHeaders(settled),
    servedHeaders: (status) =>
      settlementHeaders({
        ...settled,
        extensions: deps.receipts.receiptExtension({
          network: `eip155:${deps.config.chainId}`,
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

/** Seconds a client waits before presenting a pending payment again (a block or two on Base). */
const PENDING_RETRY_AFTER_SECONDS = 2;

/**
 * `settlement_pending`: the transaction is sent, not seen included within the wait. 202, never a 402 (a client would
 * sign a second payment) nor a 5xx: x402's SettleResponse in PAYMENT-RESPONSE (success false, the transaction), and
 * the same payment, or another under the same payment identifier, presented again is served once it is included.
 */
function answerPending(
  deps: PaidCallDeps,
  call: Call,
  version: 1 | 2,
  payer: string,
  outcome: { reason: string; message: string; transaction?: string },
): void {
  const transaction = outcome.transaction ?? '';
  const settlement = settlementResponse({
    success: false,
    transaction,
    chainId: deps.config.chainId,
    payer,
    version,
    errorReason: outcome.reason,
  });
  call.res.setHeader(
    version === 2 ? X402_HEADERS.paymentResponse : X402_HEADERS.v1PaymentResponse,
    encodeX402Header(settlement),
  );
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

/**
 * The request a payment identifier names: method, the paid URL (path and query), the body's type and length, and
 * the price. The body's bytes are not read here (the forward reads them, once): two bodies of one length and type
 * under one id are the same purchase, answered as the first (never charged twice).
 */
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
