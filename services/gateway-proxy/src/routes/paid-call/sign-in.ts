import { HttpError } from '@paygate/http';
import { SIWX_HEADER } from '../../x402/extensions/sign-in-with-x';
import { type Call, type PaidCallDeps, sendError } from './call';
import { sendPaymentRequired } from './challenge';
import type { Offer } from './offer';
import type { Paid } from './pay';

const NO_HEADERS: Readonly<Record<string, string>> = Object.freeze({});

/**
 * x402's sign-in-with-x on a subscription endpoint: the SIGN-IN-WITH-X header's wallet, verified, finds its
 * subscription claim, which is then served like a presented payment. Undefined when there is no header (or the
 * endpoint sells no subscription): the call gets its 402. A refusal is a 402 with a fresh challenge and the
 * reason (a standard client pays then), or a 503 when the chain did not answer a contract wallet's check.
 */
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
    if (outcome.status === 503) {
      // Nothing refused (the chain did not answer): libs/http's envelope, and the same message may come again.
      call.res.setHeader('Retry-After', '2');
      sendError(call, new HttpError(503, outcome.failure.reason, outcome.failure.message));
    } else {
      sendPaymentRequired(deps, offer, call, 402, outcome.failure.reason, outcome.failure.message);
    }
    return undefined;
  }
  deps.metrics.accepted.inc({ mode: offer.skill.mode, fresh: 'false' });
  return { claim: outcome.claim, answerHeaders: NO_HEADERS };
}
