import {
  decodePaymentHeader,
  MODE_HEADER,
  PAYMENT_HEADER,
  PaymentHeaderError,
  type PaymentProof,
  type PaymentRequirements,
  pickPaymentHeader,
  RECEIPT_HEADER,
  resourceFor,
} from '@paygate/agent-client';
import { formatUsdc, parseUsdc } from '@paygate/money';
import type { Express, Request, Response } from 'express';
import type { PaymentFailure } from '../payments/failures';
import type { PresentOutcome, Purchase } from '../payments/service';
import { type EndpointSnapshot, findEndpoint, paymentKindOf, type SkillSnapshot } from '../skills/projection';
import type { GatewayState } from '../state';

const SKILL_PATH = /^\/([a-z0-9][a-z0-9-]*)(\/.*)?$/;

// Decoding checksums three addresses (keccak): a subscriber repeating the same header skips that work.
const decodedHeaders = new Map<string, PaymentProof>();
function decodeCached(value: string): PaymentProof {
  let proof = decodedHeaders.get(value);
  if (!proof) {
    proof = decodePaymentHeader(value);
    if (decodedHeaders.size >= 10_000) decodedHeaders.clear();
    decodedHeaders.set(value, proof);
  }
  return proof;
}

function errorBody(req: Request, code: string, message: string, extra: Record<string, unknown> = {}) {
  return { error: { code, message, ...extra, requestId: req.requestId } };
}

export function paymentRequirements(
  state: GatewayState,
  skill: SkillSnapshot,
  endpoint: EndpointSnapshot,
  resource: string,
): PaymentRequirements & { skill: string; endpoint: { method: string; path: string } } {
  const { config } = state;
  const kind = paymentKindOf(skill.type);
  const base = endpoint.description || skill.description;
  const description =
    kind === 'subscription'
      ? `${skill.displayName}: ${base} (${skill.durationDays ?? 30} days of access)`
      : `${skill.displayName}: ${base}`;
  return {
    price: formatUsdc(parseUsdc(endpoint.price)),
    description,
    network: config.network,
    chainId: config.chainId,
    payTo: config.escrowAddress,
    asset: config.usdcAddress,
    resource,
    confirmations: config.confirmations,
    type: kind,
    ...(kind === 'subscription' ? { durationDays: skill.durationDays ?? 30 } : {}),
    ...(kind === 'product' ? { requiresShipping: skill.requiresShipping ?? false } : {}),
    header: PAYMENT_HEADER,
    mode: skill.mode,
    skill: skill.name,
    endpoint: { method: endpoint.method, path: endpoint.path },
  };
}

function refuse(res: Response, failure: PaymentFailure, requirements: PaymentRequirements) {
  if (failure.reason === 'chain_unavailable') {
    res.status(503).setHeader('Retry-After', '2');
    res.json({ error: 'Payment not verified', reason: failure.reason, message: failure.message });
    return;
  }
  res.status(402).json({
    error: 'Invalid payment',
    reason: failure.reason,
    message: failure.message,
    ...(failure.details ?? {}),
    requirements,
  });
}

/**
 * Paid skill URLs: {base_url}/api/v1/skills/<skill_name><path>. Unknown skill or path 404, wrong method 405,
 * no proof 402 with everything needed to pay, a bad header 400, a refused proof 402 with a reason; a
 * verified payment is forwarded to the seller (PROXY) or answered with a signed ticket (TICKET).
 */
export function mountSkillRoutes(app: Express, state: GatewayState): void {
  app.use('/api/v1/skills', async (req: Request, res: Response) => {
    const started = performance.now();
    const match = SKILL_PATH.exec(req.path);
    if (!match) {
      res.status(404).json(errorBody(req, 'skill_not_found', 'no skill at this URL'));
      return;
    }
    const name = match[1]!;
    const path = match[2] ?? '/';
    const skill = await state.skills.byName(name);
    if (!skill) {
      res.status(404).json(errorBody(req, 'skill_not_found', `no skill named "${name}"`));
      return;
    }
    if (skill.status !== 'ACTIVE') {
      res
        .status(404)
        .json(errorBody(req, 'skill_not_active', `skill "${name}" is ${skill.status} and cannot be bought`));
      return;
    }
    if (req.method === 'HEAD') {
      // Validation pings: say what the endpoint costs; nothing is forwarded or charged.
      const onPath = skill.endpoints.find(
        (e) => e.active && findEndpoint(skill, e.method, path).kind === 'found',
      );
      res.status(onPath ? 200 : 404);
      if (onPath) {
        res.setHeader('X-402-Price', formatUsdc(parseUsdc(onPath.price)));
        res.setHeader('X-402-Network', state.config.network);
        res.setHeader('Allow', onPath.method);
      }
      res.end();
      return;
    }
    const lookup = findEndpoint(skill, req.method, path);
    if (lookup.kind === 'no_path') {
      res
        .status(404)
        .json(errorBody(req, 'endpoint_not_found', `skill "${name}" has no endpoint at ${path}`, { path }));
      return;
    }
    if (lookup.kind === 'wrong_method') {
      res.setHeader('Allow', lookup.allowed.join(', '));
      res
        .status(405)
        .json(
          errorBody(
            req,
            'method_not_allowed',
            `${path} of skill "${name}" answers ${lookup.allowed.join(', ')}, not ${req.method}`,
            { allowed: lookup.allowed },
          ),
        );
      return;
    }
    const endpoint = lookup.endpoint;
    const resource = resourceFor(req.method, `${state.config.publicBaseUrl}/api/v1/skills/${name}${path}`);
    // Built only when an answer needs it: a paying subscriber's repeated call never does.
    const requirements = () => paymentRequirements(state, skill, endpoint, resource);
    const clientBucket = `ip:${req.ip}:${skill.skillId}`;

    const headerValue = pickPaymentHeader((h) => req.headers[h.toLowerCase()]);
    if (!headerValue) {
      if (!(await state.rateLimit(req, res, clientBucket))) return;
      res.status(402).json(requirements());
      return;
    }
    let proof: PaymentProof;
    try {
      proof = decodeCached(headerValue);
    } catch (error) {
      if (!(await state.rateLimit(req, res, clientBucket))) return;
      const e = error as PaymentHeaderError;
      const field = e instanceof PaymentHeaderError ? e.field : 'header';
      res.status(400).json(
        errorBody(req, 'invalid_payment_header', `${PAYMENT_HEADER} ${e.message}`, {
          field: `${PAYMENT_HEADER}${field === 'header' ? '' : `.${field}`}`,
          rule: e instanceof PaymentHeaderError ? e.rule : 'is invalid',
        }),
      );
      return;
    }

    const kind = paymentKindOf(skill.type);
    const purchase: Purchase = {
      resource,
      priceMicro: parseUsdc(endpoint.price),
      kind,
      durationDays: kind === 'subscription' ? (skill.durationDays ?? 30) : null,
      sellerId: skill.sellerId,
      skillId: skill.skillId,
      skillName: skill.name,
      endpointId: endpoint.endpointId,
      holdPeriodHours: skill.holdPeriodHours,
      channel: skill.mode === 'TICKET' ? 'ticket' : 'proxy',
    };
    // A proof signed by its payer for this resource counts against that wallet before any chain lookup;
    // anything else counts against the client address, so nobody can spend another wallet's quota.
    const walletBucket = `wallet:${proof.from.toLowerCase()}:${skill.skillId}`;
    const signedHere = state.payments.signedBy(proof, resource);
    if (signedHere && !(await state.rateLimit(req, res, walletBucket))) return;
    const outcome: PresentOutcome = await state.payments.present(proof, purchase);
    if (!signedHere && !(await state.rateLimit(req, res, outcome.ok ? walletBucket : clientBucket))) return;
    if (!outcome.ok) {
      state.metrics.refused.inc({ reason: outcome.failure.reason });
      refuse(res, outcome.failure, requirements());
      return;
    }
    state.metrics.accepted.inc({ mode: skill.mode, fresh: String(outcome.fresh) });
    const claim = outcome.claim;
    const ownMs = performance.now() - started - outcome.chainMs;
    res.setHeader(
      'Server-Timing',
      `chain;dur=${outcome.chainMs.toFixed(2)}, paygate;dur=${ownMs.toFixed(2)}`,
    );

    if (skill.mode === 'TICKET') {
      const { ticket, expiresAt } = state.tickets.issue({
        payer: claim.payer,
        skill: skill.name,
        skillId: skill.skillId,
        sellerId: skill.sellerId,
        method: endpoint.method,
        path,
        kind: claim.kind,
        txHash: claim.tx_hash,
        amount: formatUsdc(claim.amount_micro),
        notAfter: claim.access_expires_at,
      });
      const query = req.originalUrl.includes('?') ? req.originalUrl.slice(req.originalUrl.indexOf('?')) : '';
      res.setHeader(MODE_HEADER, 'TICKET');
      res.setHeader(RECEIPT_HEADER, claim.tx_hash);
      res.status(200).json({
        ticket,
        header: 'X-402-Ticket',
        expiresAt: expiresAt.toISOString(),
        url: `${skill.apiBaseUrl.replace(/\/$/, '')}${path}${query}`,
        method: endpoint.method,
        txHash: claim.tx_hash,
        payer: claim.payer,
      });
      return;
    }

    const query = req.originalUrl.includes('?') ? req.originalUrl.slice(req.originalUrl.indexOf('?')) : '';
    let target: URL;
    try {
      target = new URL(`${skill.apiBaseUrl.replace(/\/$/, '')}${path}${query}`);
    } catch {
      await state.payments.markRetryable(claim);
      res.status(502).json(errorBody(req, 'upstream_misconfigured', "the seller's apiBaseUrl is not a URL"));
      return;
    }
    const result = await state.forward(req, res, {
      url: target,
      extraHeaders: {
        'x-paygate-payer': claim.payer,
        'x-paygate-tx-hash': claim.tx_hash,
        'x-paygate-amount': formatUsdc(claim.amount_micro),
        'x-paygate-skill': skill.name,
      },
    });
    if (result.kind === 'failed' || result.status >= 500) {
      const retryUntil = await state.payments.markRetryable(claim);
      const retryHeaders: Record<string, string> = { [RECEIPT_HEADER]: claim.tx_hash };
      if (retryUntil) retryHeaders['X-402-Retry-Until'] = retryUntil.toISOString();
      if (result.kind === 'answered') {
        result.relay(retryHeaders);
        return;
      }
      res.set(retryHeaders);
      res.status(result.reason === 'timeout' ? 504 : 502).json(
        errorBody(req, 'upstream_failed', result.message, {
          txHash: claim.tx_hash,
          retryUntil: retryUntil?.toISOString() ?? null,
          retry: retryUntil
            ? 'present the same X-402-Payment header again for the same resource before retryUntil'
            : 'your subscription stays valid; call again',
        }),
      );
      return;
    }
    result.relay({ [RECEIPT_HEADER]: claim.tx_hash });
    await state.payments.markServed(claim);
  });
}
