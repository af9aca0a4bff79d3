import { formatUsdc } from '@paygate/money';
import { MODE_HEADER, RECEIPT_HEADER } from '@paygate/protocol';
import { sendJson } from '../../http-util';
import { type ForwardResult, forwardRequest } from '../../proxy/forward';
import { type Call, errorBody, type PaidCallDeps } from './call';
import type { Offer } from './offer';
import type { Paid } from './pay';

/**
 * Serves a claimed call: a TICKET answer (the call is then done), or the PROXY forward to the seller with the
 * payer headers, whose result `book` decides on.
 */
export async function forward(
  deps: PaidCallDeps,
  offer: Offer,
  call: Call,
  paid: Paid,
): Promise<ForwardResult | undefined> {
  const { skill, endpoint, base } = offer;
  const { claim } = paid;
  const { res, url } = call;
  for (const name in paid.answerHeaders) res.setHeader(name, paid.answerHeaders[name]!);
  if (skill.mode === 'TICKET') {
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
  if (!base) {
    await deps.callOutcomes.markFailed(claim, { outcome: 'misconfigured' });
    sendJson(
      res,
      502,
      errorBody(call.requestId, 'upstream_misconfigured', "the seller's apiBaseUrl is not an http(s) URL"),
    );
    return undefined;
  }
  const forwardingKey =
    deps.forwardingKeys.peek(skill.sellerId) ?? (await deps.forwardingKeys.keyFor(skill.sellerId));
  return forwardRequest(
    call.req,
    res,
    {
      url: { origin: base.origin, path: `${base.pathPrefix}${url.path}${url.query}` },
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
