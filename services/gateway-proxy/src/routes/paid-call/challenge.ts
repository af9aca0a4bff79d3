import { HttpError } from '@paygate/http';
import { decodePaymentRequired, signInWithXChallenge, X402_HEADERS } from '@paygate/protocol';
import { sendJson } from '../../http-util';
import { sendPaywallPage, wantsPaywallPage } from '../../paywall/page';
import { CALL_REASONS } from '../../reasons';
import { x402Challenge } from '../../x402/server/challenge';
import { paymentRequirements } from '../../x402/server/payment-required';
import { type Call, type PaidCallDeps, sendError } from './call';
import type { Offer } from './offer';
import type { Proof } from './proof';

/** No proof: the 402 with what to pay (a browser gets the paywall page with the same offer). */
export function challenge(deps: PaidCallDeps, offer: Offer, call: Call): void {
  if (wantsPaywallPage(call.req)) sendPaywall(deps, offer, call);
  else sendPaymentRequired(deps, offer, call);
}

export function refuseUnreadable(
  deps: PaidCallDeps,
  offer: Offer,
  call: Call,
  proof: Extract<Proof, { kind: 'unreadable' }>,
): void {
  if (proof.x402) sendPaymentRequired(deps, offer, call, 'invalid_payload', proof.message);
  else {
    const { message, field, rule } = proof;
    sendError(call, new HttpError(400, CALL_REASONS.invalidPaymentHeader, message, { field, rule }));
  }
}

/** The URL the client asked for, query included: x402's resource.url, and what offers and receipts name. */
export function resourceUrlOf(offer: Offer, call: Call): string {
  return `${offer.resource.slice(offer.resource.indexOf(' ') + 1)}${call.url.query}`;
}

/** Paygate's requirements and x402's challenge for the offer; its resource.url is the URL asked for, query included. */
function challengeFor(deps: PaidCallDeps, offer: Offer, call: Call, error: string) {
  const { endpoint, skill } = offer;
  const requirements = paymentRequirements(deps.config, skill, endpoint, offer.resource);
  const url = resourceUrlOf(offer, call);
  const challenge = x402Challenge(
    deps.x402,
    {
      url,
      description: requirements.description,
      priceMicro: offer.purchase.priceMicro,
      endpoint,
      skill,
      // A subscriber that paid once signs in with its wallet (x402's sign-in-with-x) instead of paying again.
      extensions:
        offer.purchase.kind === 'subscription'
          ? signInWithXChallenge({
              origin: deps.config.publicBaseUrl,
              resourceUrl: url,
              chainId: deps.config.chainId,
            })
          : undefined,
    },
    error,
    deps.receipts,
  );
  return { requirements, challenge };
}

function sendPaywall(deps: PaidCallDeps, offer: Offer, call: Call): void {
  const { requirements, challenge } = challengeFor(deps, offer, call, 'payment required');
  const x402Header = challenge.headers[X402_HEADERS.paymentRequired];
  sendPaywallPage(
    call.res,
    {
      title: offer.skill.displayName,
      description: requirements.description,
      price: requirements.price,
      networkLabel: deps.config.network === 'local' ? 'the local test chain' : deps.config.network,
      method: offer.endpoint.method,
      requirements: { ...requirements, amountMicro: offer.purchase.priceMicro.toString() },
      paymentRequired: x402Header ? decodePaymentRequired(x402Header) : undefined,
    },
    challenge.headers,
  );
}

/** Paygate's body and x402's PAYMENT-REQUIRED; a refusal's body is docs/api.md's "Invalid payment". */
export function sendPaymentRequired(
  deps: PaidCallDeps,
  offer: Offer,
  call: Call,
  reason?: string,
  message?: string,
): void {
  const { requirements, challenge } = challengeFor(deps, offer, call, reason ?? 'payment required');
  for (const [name, value] of Object.entries(challenge.headers)) call.res.setHeader(name, value);
  sendJson(
    call.res,
    402,
    reason
      ? { error: 'Invalid payment', reason, message, ...challenge.body, requirements }
      : { ...requirements, ...challenge.body },
  );
}
