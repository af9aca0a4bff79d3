import { HttpError } from '@paygate/http';
import { formatUsdc } from '@paygate/money';
import { MODE_HEADER, RECEIPT_HEADER } from '@paygate/protocol';
import { sendJson } from '../../http-util';
import { type ForwardResult, forwardRequest } from '../../proxy/forward';
import { type Call, type PaidCallDeps, sendError } from './call';
import type { Offer } from './offer';
import type { Paid } from './pay';

/** A TICKET answer (the call is then done), or the PROXY forward whose result `book` decides on. */
export function forward(
  deps: PaidCallDeps,
  offer: Offer,
  call: Call,
  paid: Paid,
): Promise<ForwardResult | undefined> {
  const { skill } = offer;
  for (const name in paid.answerHeaders) call.res.setHeader(name, paid.answerHeaders[name]!);
  if (skill.mode === 'TICKET') return answerWithTicket(deps, offer, call, paid);
  if (!offer.base) return refuseMisconfigured(deps, call, paid);
  // Usually in memory: no extra promise on the hot path.
  const known = deps.forwardingKeys.peek(skill.sellerId);
  if (known) return forwardToSeller(deps, offer, call, paid, known);
  return deps.forwardingKeys
    .keyFor(skill.sellerId)
    .then((key) => forwardToSeller(deps, offer, call, paid, key));
}

async function answerWithTicket(
  deps: PaidCallDeps,
  offer: Offer,
  call: Call,
  { claim, servedHeaders }: Paid,
): Promise<undefined> {
  const { skill, endpoint } = offer;
  const { res, url } = call;
  const { ticket, expiresAt } = await deps.tickets.issue({
    payer: claim.payer,
    skill: skill.name,
    skillId: skill.skillId,
    sellerId: skill.sellerId,
    method: endpoint.method,
    path: url.path,
    kind: claim.kind,
    txHash: claim.tx_hash,
    amount: formatUsdc(claim.amount_micro),
    notAfter: claim.access_expires_at,
  });
  const served = servedHeaders?.(200);
  for (const name in served) res.setHeader(name, served[name]!);
  res.setHeader(MODE_HEADER, 'TICKET');
  res.setHeader(RECEIPT_HEADER, claim.tx_hash);
  sendJson(res, 200, {
    ticket,
    header: 'X-402-Ticket',
    expiresAt: expiresAt.toISOString(),
    url: `${skill.apiBaseUrl.replace(/\/$/, '')}${url.path}${url.query}`,
    method: endpoint.method,
    txHash: claim.tx_hash,
    payer: claim.payer,
  });
  return undefined;
}

async function refuseMisconfigured(deps: PaidCallDeps, call: Call, { claim }: Paid): Promise<undefined> {
  await deps.callOutcomes.markFailed(claim, { outcome: 'misconfigured' });
  sendError(
    call,
    new HttpError(502, 'upstream_misconfigured', "the seller's apiBaseUrl is not an http(s) URL"),
  );
  return undefined;
}

function forwardToSeller(
  deps: PaidCallDeps,
  offer: Offer,
  call: Call,
  { claim }: Paid,
  forwardingKey: Awaited<ReturnType<PaidCallDeps['forwardingKeys']['keyFor']>>,
): Promise<ForwardResult> {
  const { skill } = offer;
  const base = offer.base!;
  return forwardRequest(
    call.req,
    call.res,
    {
      url: { origin: base.origin, path: `${base.pathPrefix}${call.url.path}${call.url.query}` },
      clientIp: call.clientIp,
      extraHeaders: {
        'x-paygate-payer': claim.payer,
        'x-paygate-tx-hash': claim.tx_hash,
        'x-paygate-amount': formatUsdc(claim.amount_micro),
        'x-paygate-skill': skill.name,
      },
      forwardingKey,
    },
    deps.forwarding,
  );
}
