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
  return deps.signIn.subscriptionFor(header, offer.purchase).then((outcome) => {
    if (!outcome.ok) {
      const { reason, message } = outcome.failure;
      deps.metrics.refused.inc({ reason });
      if (outcome.status === 503) sendUnavailable(call, reason, message);
      else sendPaymentRequired(deps, offer, call, reason, message);
      return undefined;
    }
    deps.metrics.accepted.inc({ mode: offer.skill.mode, fresh: 'false' });
    return { claim: outcome.claim, answerHeaders: NO_HEADERS };
  });
}
