import { SIWX_HEADER } from '../../x402/extensions/sign-in-with-x';
import { type Call, type PaidCallDeps, sendUnavailable } from './call';
import { sendPaymentRequired } from './challenge';
import type { Offer } from './offer';
import { NO_HEADERS, type Paid } from './pay';

/** SIGN-IN-WITH-X on a subscription endpoint: the wallet's subscription claim, served like a presented payment. */
export function signIn(deps: PaidCallDeps, offer: Offer, call: Call): Promise<Paid | undefined> | undefined {
  if (offer.purchase.kind !== 'subscription') return undefined;
  const header = call.req.headers[SIWX_HEADER];
  if (typeof header !== 'string' || header === '') return undefined;
  return signedIn(deps, offer, call, header);
}

async function signedIn(
  deps: PaidCallDeps,
  offer: Offer,
  call: Call,
  header: string,
): Promise<Paid | undefined> {
  const outcome = await deps.signIn.subscriptionFor(header, offer.purchase);
  if (!outcome.ok) {
    deps.metrics.refused.inc({ reason: outcome.failure.reason });
    if (outcome.status === 503) sendUnavailable(call, outcome.failure.reason, outcome.failure.message);
    else sendPaymentRequired(deps, offer, call, outcome.failure.reason, outcome.failure.message);
    return undefined;
  }
  deps.metrics.accepted.inc({ mode: offer.skill.mode, fresh: 'false' });
  return { claim: outcome.claim, answerHeaders: NO_HEADERS };
}
