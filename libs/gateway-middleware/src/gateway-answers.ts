import {
  encodeX402Header,
  signInWithXChallenge,
  X402_HEADERS,
  type X402Offer,
  x402PaymentRequired,
} from '@paygate/protocol';
import type { Request } from 'express';
import type { Offer, PaidRequest } from './gateway-offers';
import type { PaymentParameters, PaymentParametersSource } from './payment-parameters';

export type RefusalBody = { error: string; reason: string; message: string };

/** The route's x402 terms, or undefined where x402 is not offered. */
export type X402RouteOf = (offer: Offer, p: PaymentParameters, req: Request) => X402Offer | undefined;

/** Answers a 402 with what to pay (and why the presented payment was refused, when given). */
export type AnswerPaymentRequired = (paid: PaidRequest, refusal?: RefusalBody) => Promise<void>;

/** The 402 body: the offer, and Paygate's parameters when known (else a note to retry). */
function paymentRequiredBody(
  offer: Offer,
  p: PaymentParameters | undefined,
  resource: string,
  refusal: RefusalBody | undefined,
  challengeBody: Record<string, unknown> | undefined,
) {
  return {
    ...refusal,
    price: offer.price,
    description: offer.description,
    ...(offer.durationDays !== undefined ? { durationDays: offer.durationDays } : {}),
    ...(offer.accessUrl !== undefined ? { accessUrl: offer.accessUrl } : {}),
    ...(offer.requiresShipping !== undefined ? { requiresShipping: offer.requiresShipping } : {}),
    ...(p ? { network: p.network, chainId: p.chainId, payTo: p.payTo, asset: p.asset } : {}),
    resource,
    ...(p ? { confirmations: p.confirmations } : {}),
    type: offer.type,
    header: 'X-402-Payment',
    ...(p
      ? {}
      : { unavailable: 'Paygate cannot be reached right now to name the escrow wallet; retry shortly' }),
    ...challengeBody,
  };
}

/** A subscription's PAYMENT-REQUIRED: nothing to pay with x402, only the sign-in-with-x challenge for subscribers. */
function signInChallenge(offer: Offer, p: PaymentParameters, origin: string, url: string, error: string) {
  return encodeX402Header({
    x402Version: 2,
    error,
    resource: { url, description: offer.description, mimeType: 'application/json' },
    accepts: [],
    extensions: signInWithXChallenge({ origin, resourceUrl: url, chainId: p.chainId }),
  });
}

export function paymentRequiredAnswer(
  parameters: PaymentParametersSource,
  x402RouteOf: X402RouteOf,
  originOf: (req: Request) => string,
): AnswerPaymentRequired {
  return async ({ offer, req, res, resource }, refusal) => {
    const p = await parameters.get();
    const route = p ? x402RouteOf(offer, p, req) : undefined;
    const error = refusal?.reason ?? 'payment required';
    const challenge = route ? x402PaymentRequired(route, error) : undefined;
    if (challenge) res.setHeader(X402_HEADERS.paymentRequired, challenge.header);
    else if (p && offer.type === 'subscription') {
      const origin = originOf(req);
      const url = `${origin}${req.originalUrl}`;
      res.setHeader(X402_HEADERS.paymentRequired, signInChallenge(offer, p, origin, url, error));
    }
    res.setHeader('Cache-Control', 'no-store');
    res.status(402).json(paymentRequiredBody(offer, p, resource, refusal, challenge?.body));
  };
}
