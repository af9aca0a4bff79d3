import { type AnyRoute, defineRoute, rateLimitMiddleware } from '@paygate/http';
import { formatUsdc, parseUsdc } from '@paygate/money';
import { SellerAuth } from '@paygate/seller-auth';
import { Type } from '@sinclair/typebox';
import type { PaymentClaim, Purchase } from '../payments/service';
import { paymentKindOf, type SkillSnapshot } from '../skills/projection';
import type { GatewayState } from '../state';
import { bazaarExtension } from './bazaar';
import type { X402Outcome } from './payments';
import {
  caip2,
  type DecodedX402Payment,
  parseX402Payment,
  requirementsV2,
  v1NetworkOf,
  type X402HeaderError,
} from './protocol';

export const X402_PREFIX = '/api/v1/x402';

/** The requirements a seller's x402 server sends with a payment: v2 (`amount`) or v1 (`maxAmountRequired`). */
const Requirements = Type.Object({
  scheme: Type.String({ maxLength: 32 }),
  network: Type.String({ maxLength: 64 }),
  asset: Type.String({ maxLength: 128 }),
  payTo: Type.String({ maxLength: 128 }),
  amount: Type.Optional(Type.String({ pattern: '^[0-9]{1,30}$' })),
  maxAmountRequired: Type.Optional(Type.String({ pattern: '^[0-9]{1,30}$' })),
  resource: Type.Optional(Type.String({ maxLength: 2048 })),
  maxTimeoutSeconds: Type.Optional(Type.Integer({ minimum: 0 })),
  extra: Type.Optional(Type.Unknown()),
});

const FacilitatorRequest = Type.Object({
  x402Version: Type.Union([Type.Literal(1), Type.Literal(2)]),
  paymentPayload: Type.Record(Type.String(), Type.Unknown()),
  paymentRequirements: Requirements,
});

const VerifyResponse = Type.Object(
  {
    isValid: Type.Boolean(),
    invalidReason: Type.Optional(Type.String()),
    invalidMessage: Type.Optional(Type.String()),
    payer: Type.Optional(Type.String()),
  },
  { description: "x402's VerifyResponse" },
);
const SettleResponse = Type.Object(
  {
    success: Type.Boolean(),
    errorReason: Type.Optional(Type.String()),
    errorMessage: Type.Optional(Type.String()),
    payer: Type.Optional(Type.String()),
    transaction: Type.String(),
    network: Type.String(),
  },
  { description: "x402's SettleResponse" },
);

type Checked =
  | {
      ok: true;
      payment: ReturnType<typeof parseX402Payment>;
      priceMicro: bigint;
      resourceUrl: string;
      /** The requirements' maxTimeoutSeconds, at most X402_FACILITATOR_MAX_TIMEOUT_SECONDS: bounds validBefore. */
      maxTimeoutSeconds: number;
    }
  | { ok: false; reason: string; message: string; payer?: string };

/** `Server-Timing` of a facilitator answer: each named phase and the whole handler (`total`), in ms. */
function serverTiming(started: number, phases: Record<string, number> = {}): string {
  const parts = Object.entries(phases).map(([name, ms]) => `${name};dur=${ms.toFixed(2)}`);
  parts.push(`total;dur=${(performance.now() - started).toFixed(2)}`);
  return parts.join(', ');
}

const COPY_POLL_MS = 50;
const BEING_SETTLED = /being settled/;
const COPY_POLL_ROUNDS_MAX = 2000;

interface Running {
  outcome: Promise<X402Outcome>;
  /** Who the settlement is for: a copy for the same seller and resource shares its outcome. */
  purchaseKey: string;
}
const runningByState = new WeakMap<GatewayState, Map<string, Running>>();

/**
 * Settles an x402 payment; a copy of a payment that is being settled (by this gateway or by another replica)
 * waits for that settlement instead of answering 503. With `share` (the facilitator), a copy for the same seller
 * and resource is answered with the in-flight settlement's outcome: the one payment is settled once and every
 * copy learns how. Without it (paid skill URLs, where a copy must not be served a second call), the copy is
 * presented again once the first is done, under the purchase's reuse rules.
 */
export async function settleAwaitingCopies(
  state: GatewayState,
  payment: DecodedX402Payment,
  purchase: Purchase,
  version: 1 | 2,
  options: { maxTimeoutSeconds?: number; share: boolean },
): Promise<X402Outcome> {
  let running = runningByState.get(state);
  if (!running) {
    running = new Map();
    runningByState.set(state, running);
  }
  const a = payment.authorization;
  const id = `${a.from.toLowerCase()}:${a.nonce.toLowerCase()}:${payment.signature.toLowerCase()}`;
  const purchaseKey = `${purchase.sellerId}\n${purchase.resource}`;
  const first = running.get(id);
  if (first) {
    const outcome = await first.outcome.catch(() => undefined);
    if (options.share && outcome && first.purchaseKey === purchaseKey) {
      return outcome.ok ? { ...outcome, fresh: false } : outcome;
    }
  }
  const settle = async (): Promise<X402Outcome> => {
    const outcome = await state.x402.settle(payment, purchase, version, {
      maxTimeoutSeconds: options.maxTimeoutSeconds,
    });
    // Only a copy is waited for: the refusal X402Payments gives a payment someone else is settling (its own
    // attempt's 503s, after the relayer's wait, are answered as they are). x402-reference.test.ts pins the text.
    if (outcome.ok || outcome.reason !== 'x402_unavailable' || !BEING_SETTLED.test(outcome.message)) {
      return outcome;
    }
    // Presented while another replica (or a caller that gave up) settles it: wait for that settlement.
    const settled = await settledElsewhere(state, payment);
    if (!settled) return outcome;
    if (
      options.share &&
      settled.state === 'settled' &&
      settled.seller_id === purchase.sellerId &&
      settled.resource === purchase.resource &&
      settled.claim_id
    ) {
      const claim = (await state.ctx.db
        .selectFrom('payment_claims')
        .selectAll()
        .where('id', '=', settled.claim_id)
        .executeTakeFirst()) as PaymentClaim | undefined;
      if (claim) {
        return {
          ok: true,
          claim,
          txHash: claim.tx_hash,
          payer: claim.payer,
          fresh: false,
          timings: { verificationMs: 0, simulationMs: 0, submissionMs: 0, inclusionMs: 0 },
        };
      }
    }
    return state.x402.settle(payment, purchase, version, { maxTimeoutSeconds: options.maxTimeoutSeconds });
  };
  if (running.has(id)) return settle();
  const outcome = settle();
  running.set(id, { outcome, purchaseKey });
  try {
    return await outcome;
  } finally {
    running.delete(id);
  }
}

interface AuthorizationState {
  state: 'submitting' | 'settled' | 'refused';
  seller_id: string;
  resource: string;
  claim_id: string | null;
}

/**
 * The authorization's row once it leaves `submitting` (bounded by how long a live caller may wait for its
 * inclusion and the relayer); undefined when it is not being settled with this signature, or still is.
 */
async function settledElsewhere(
  state: GatewayState,
  payment: DecodedX402Payment,
): Promise<AuthorizationState | undefined> {
  const a = payment.authorization;
  const deadline = Date.now() + state.config.x402InclusionWaitMs + state.config.relayerTimeoutMs;
  for (let round = 0; round < COPY_POLL_ROUNDS_MAX; round++) {
    const row = (await state.ctx.db
      .selectFrom('x402_authorizations')
      .select(['state', 'seller_id', 'resource', 'claim_id', 'signature'])
      .where('chain_id', '=', state.config.chainId)
      .where('token', '=', state.config.usdcAddress.toLowerCase())
      .where('payer', '=', a.from.toLowerCase())
      .where('auth_nonce', '=', a.nonce.toLowerCase())
      .executeTakeFirst()) as (AuthorizationState & { signature: string }) | undefined;
    if (!row || row.signature !== payment.signature.toLowerCase()) return undefined;
    if (row.state !== 'submitting') return row;
    if (Date.now() >= deadline) return undefined;
    await new Promise((resolve) => setTimeout(resolve, COPY_POLL_MS));
  }
  return undefined;
}

/**
 * Paygate as an x402 facilitator for sellers running their own x402 server (for example `@x402/express` with
 * `HTTPFacilitatorClient`): verify and settle in the standard's shapes, authenticated by the seller's `sk_` key,
 * for payments into Paygate's escrow only; a settled payment is credited to the key's seller, like any payment.
 * Also the public x402 Bazaar discovery list of every active Paygate skill endpoint.
 */
export function x402Routes(state: GatewayState): AnyRoute[] {
  const auth = new SellerAuth(state.ctx.bus);
  const sellerKey = { scheme: 'apiKey', middleware: auth.middleware() };
  const { config } = state;
  // Counted per seller key (after authentication): verify and settle are what an x402 server calls per sale.
  const perSeller = [
    rateLimitMiddleware(
      state.facilitatorLimiter,
      (req) => `facilitator:${req.seller!.sellerId}`,
      'facilitator calls per minute per seller key',
    ),
  ];
  const perClient = [
    rateLimitMiddleware(
      state.discoveryLimiter,
      (req) => `discovery:${req.ip}`,
      'discovery requests per minute per client address',
    ),
  ];

  /** The seller's requirements must be Paygate's: exact scheme, this network, USDC, escrow as payTo. */
  function check(body: typeof FacilitatorRequest.static): Checked {
    let payment: ReturnType<typeof parseX402Payment>;
    try {
      payment = parseX402Payment(body.paymentPayload, body.x402Version);
    } catch (error) {
      return { ok: false, reason: 'invalid_payload', message: (error as X402HeaderError).message };
    }
    const r = body.paymentRequirements;
    const payer = payment.authorization.from;
    const network = body.x402Version === 2 ? caip2(config.chainId) : v1NetworkOf(config.chainId);
    if (r.scheme !== 'exact') {
      return {
        ok: false,
        reason: 'invalid_exact_evm_scheme',
        message: 'Paygate settles the exact scheme',
        payer,
      };
    }
    if (r.network !== network) {
      return {
        ok: false,
        reason: 'invalid_exact_evm_network_mismatch',
        message: `Paygate settles on ${network ?? caip2(config.chainId)}`,
        payer,
      };
    }
    if (r.asset.toLowerCase() !== config.usdcAddress.toLowerCase()) {
      return {
        ok: false,
        reason: 'invalid_exact_evm_asset_mismatch',
        message: `Paygate settles USDC at ${config.usdcAddress}`,
        payer,
      };
    }
    if (r.payTo.toLowerCase() !== config.escrowAddress.toLowerCase()) {
      return {
        ok: false,
        reason: 'invalid_exact_evm_recipient_mismatch',
        message: `payTo must be Paygate's escrow ${config.escrowAddress}`,
        payer,
      };
    }
    const amount = r.amount ?? r.maxAmountRequired;
    if (!amount || BigInt(amount) <= 0n) {
      return {
        ok: false,
        reason: 'invalid_exact_evm_authorization_value',
        message: 'paymentRequirements has no positive amount',
        payer,
      };
    }
    if (BigInt(amount) < config.x402MinAmountMicro) {
      return {
        ok: false,
        reason: 'invalid_exact_evm_authorization_value',
        message: `Paygate relays x402 payments of at least ${config.x402MinAmountMicro} atomic units (${formatUsdc(config.x402MinAmountMicro)} USDC); the requirements ask ${amount}`,
        payer,
      };
    }
    const resourceUrl = r.resource ?? payment.resourceUrl ?? 'x402-facilitator';
    const maxTimeoutSeconds = Math.min(
      r.maxTimeoutSeconds ?? config.x402MaxTimeoutSeconds,
      config.x402FacilitatorMaxTimeoutSeconds,
    );
    return { ok: true, payment, priceMicro: BigInt(amount), resourceUrl, maxTimeoutSeconds };
  }

  return [
    defineRoute({
      method: 'get',
      path: `${X402_PREFIX}/supported`,
      summary: 'What this facilitator settles (x402 SupportedResponse)',
      auth: sellerKey,
      before: perSeller,
      errors: {
        '429': 'rate_limited: more than X402_FACILITATOR_PER_MINUTE calls this minute (Retry-After)',
      },
      responses: {
        '200': Type.Object({
          kinds: Type.Array(Type.Unknown()),
          extensions: Type.Array(Type.String()),
          signers: Type.Unknown(),
        }),
      },
      handler: async (_req, res) => {
        const started = performance.now();
        const status = await state.x402.relayer.currentStatus();
        const v1 = v1NetworkOf(config.chainId);
        res.setHeader('Server-Timing', serverTiming(started));
        res.json({
          kinds: [
            { x402Version: 2, scheme: 'exact', network: caip2(config.chainId) },
            ...(v1 ? [{ x402Version: 1, scheme: 'exact', network: v1 }] : []),
          ],
          extensions: ['bazaar'],
          signers: { 'eip155:*': status.address ? [status.address] : [] },
        });
      },
    }),
    defineRoute({
      method: 'post',
      path: `${X402_PREFIX}/verify`,
      summary: 'Verify an x402 payment into escrow without settling it (x402 VerifyRequest → VerifyResponse)',
      auth: sellerKey,
      body: FacilitatorRequest,
      before: perSeller,
      responses: { '200': VerifyResponse },
      errors: {
        '429': 'rate_limited: more than X402_FACILITATOR_PER_MINUTE calls this minute (Retry-After)',
      },
      handler: async (req, res) => {
        const started = performance.now();
        const checked = check(req.body);
        if (!checked.ok) {
          res.setHeader('Server-Timing', serverTiming(started));
          res.json({
            isValid: false,
            invalidReason: checked.reason,
            invalidMessage: checked.message,
            payer: checked.payer,
          });
          return;
        }
        // Whether the authorization was used (Postgres, then the token) is read beside the other checks'
        // chain reads rather than after them; a refusal of those still comes first.
        const [verified, used] = await Promise.all([
          state.x402.verify(checked.payment, checked.priceMicro, {
            checkBalance: true,
            maxTimeoutSeconds: checked.maxTimeoutSeconds,
          }),
          state.x402.alreadyUsed(checked.payment).then(
            (value) => value,
            () => undefined,
          ),
        ]);
        const refusal =
          verified ??
          (used === undefined
            ? {
                status: 503,
                reason: 'x402_unavailable',
                message: 'the chain RPC did not answer; retry shortly',
              }
            : used
              ? {
                  status: 402,
                  reason: 'invalid_exact_evm_nonce_already_used',
                  message:
                    'this authorization was already used (on chain or presented for settlement); sign a new one',
                }
              : undefined);
        const payer = checked.payment.authorization.from;
        res.setHeader('Server-Timing', serverTiming(started, { verify: performance.now() - started }));
        if (refusal) {
          if (refusal.status === 503) res.status(503);
          res.json({ isValid: false, invalidReason: refusal.reason, invalidMessage: refusal.message, payer });
          return;
        }
        res.json({ isValid: true, payer });
      },
    }),
    defineRoute({
      method: 'post',
      path: `${X402_PREFIX}/settle`,
      summary:
        "Settle an x402 payment into escrow, credited to the key's seller (x402 SettleRequest → SettleResponse)",
      auth: sellerKey,
      body: FacilitatorRequest,
      before: perSeller,
      responses: { '200': SettleResponse },
      errors: {
        '429':
          'rate_limited (more than X402_FACILITATOR_PER_MINUTE calls this minute) or relayer_daily_limit (the payer or the seller used its relayed payments of the UTC day; the body is also a SettleResponse): Retry-After says when',
      },
      handler: async (req, res) => {
        const started = performance.now();
        const network =
          req.body.x402Version === 2
            ? caip2(config.chainId)
            : (v1NetworkOf(config.chainId) ?? caip2(config.chainId));
        const checked = check(req.body);
        if (!checked.ok) {
          res.setHeader('Server-Timing', serverTiming(started));
          res.json({
            success: false,
            errorReason: checked.reason,
            errorMessage: checked.message,
            payer: checked.payer,
            transaction: '',
            network,
          });
          return;
        }
        const purchase: Purchase = {
          resource: `x402 ${checked.resourceUrl}`,
          priceMicro: checked.priceMicro,
          kind: 'payPerCall',
          durationDays: null,
          sellerId: req.seller!.sellerId,
          skillId: null,
          skillName: null,
          endpointId: null,
          holdPeriodHours: 0,
          claimedVia: 'facilitator',
        };
        const outcome = await settleAwaitingCopies(state, checked.payment, purchase, req.body.x402Version, {
          maxTimeoutSeconds: checked.maxTimeoutSeconds,
          share: true,
        });
        const payer = checked.payment.authorization.from;
        res.setHeader(
          'Server-Timing',
          serverTiming(
            started,
            outcome.ok
              ? {
                  verify: outcome.timings.verificationMs,
                  simulate: outcome.timings.simulationMs,
                  submit: outcome.timings.submissionMs,
                  include: outcome.timings.inclusionMs,
                }
              : {},
          ),
        );
        if (!outcome.ok) {
          if (outcome.status === 429) {
            // A SettleResponse for x402 clients, and the shared error body for everyone else.
            res.status(429).setHeader('Retry-After', String(outcome.retryAfterSeconds ?? 60));
            res.json({
              success: false,
              errorReason: outcome.reason,
              errorMessage: outcome.message,
              payer,
              transaction: '',
              network,
              error: {
                code: outcome.reason,
                message: outcome.message,
                retryAfterSeconds: outcome.retryAfterSeconds,
                requestId: req.requestId,
              },
            });
            return;
          }
          if (outcome.status === 503) res.status(503);
          res.json({
            success: false,
            errorReason: outcome.reason,
            errorMessage: outcome.message,
            payer,
            transaction: '',
            network,
          });
          return;
        }
        res.json({ success: true, payer, transaction: outcome.txHash, network });
      },
    }),
    defineRoute({
      method: 'get',
      path: `${X402_PREFIX}/discovery/resources`,
      summary: 'Every active Paygate skill endpoint, in the x402 Bazaar discovery shape',
      query: Type.Object({
        type: Type.Optional(Type.String({ maxLength: 16 })),
        network: Type.Optional(
          Type.String({ maxLength: 64, description: 'CAIP-2 network, e.g. eip155:8453' }),
        ),
        payTo: Type.Optional(Type.String({ maxLength: 128 })),
        scheme: Type.Optional(Type.String({ maxLength: 32 })),
        extensions: Type.Optional(
          Type.String({
            maxLength: 256,
            description: 'extension keys (comma-separated) every item must carry',
          }),
        ),
        limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 20 })),
        offset: Type.Optional(Type.Integer({ minimum: 0, maximum: 100_000 })),
      }),
      before: perClient,
      errors: {
        '429': 'rate_limited: more than DISCOVERY_PER_MINUTE requests this minute from this address',
      },
      responses: {
        '200': Type.Object({
          x402Version: Type.Literal(2),
          items: Type.Array(Type.Unknown()),
          pagination: Type.Unknown(),
        }),
      },
      handler: async (req, res) => {
        const limit = req.query.limit ?? 20;
        const offset = req.query.offset ?? 0;
        const { type, network, payTo, scheme, extensions } = req.query;
        const wanted = (extensions ?? '')
          .split(',')
          .map((key) => key.trim())
          .filter(Boolean);
        // Every item is http, exact, on this network, paid into escrow, with the bazaar extension.
        const matches =
          (!type || type === 'http') &&
          (!scheme || scheme === 'exact') &&
          (!network || network === caip2(config.chainId)) &&
          (!payTo || payTo.toLowerCase() === config.escrowAddress.toLowerCase()) &&
          wanted.every((key) => key === 'bazaar');
        const items = matches ? await discoveryItems(state) : [];
        res.setHeader('Access-Control-Allow-Origin', '*');
        res.json({
          x402Version: 2,
          items: items.slice(offset, offset + limit),
          pagination: { limit, offset, total: items.length },
        });
      },
    }),
  ];
}

const MAX_DISCOVERY_SKILLS = 5000;

/** One discovery item per active endpoint of every active skill (from the gateway's skill projection). */
async function discoveryItems(state: GatewayState) {
  const rows = (await state.ctx.db
    .selectFrom('skills')
    .select(['snapshot', 'updated_at'])
    .orderBy('name')
    .limit(MAX_DISCOVERY_SKILLS)
    .execute()) as Array<{ snapshot: SkillSnapshot; updated_at: Date }>;
  const eip712 = await state.x402.tokenDomain();
  const items = [];
  for (const { snapshot: skill, updated_at } of rows) {
    if (skill.status !== 'ACTIVE') continue;
    for (const endpoint of skill.endpoints) {
      if (!endpoint.active) continue;
      const priceMicro = parseUsdc(endpoint.price);
      // Not payable with x402 (below the relayer's minimum): paid with X-402-Payment only, so not listed.
      if (priceMicro < state.config.x402MinAmountMicro) continue;
      const url = `${state.config.publicBaseUrl}/api/v1/skills/${skill.name}${endpoint.path}`;
      const description = `${skill.displayName}: ${endpoint.description || skill.description}`;
      items.push({
        resource: url,
        type: 'http',
        x402Version: 2,
        accepts: [
          requirementsV2({
            chainId: state.config.chainId,
            asset: state.config.usdcAddress,
            payTo: state.config.escrowAddress,
            amountMicro: priceMicro,
            maxTimeoutSeconds: state.config.x402MaxTimeoutSeconds,
            eip712,
            resource: { url, description, mimeType: 'application/json' },
          }),
        ],
        lastUpdated: updated_at.toISOString(),
        description,
        mimeType: 'application/json',
        serviceName: skill.displayName,
        tags: skill.categories.slice(0, 10),
        metadata: { method: endpoint.method, type: paymentKindOf(skill.type), skill: skill.name },
        extensions: bazaarExtension(endpoint, skill.name, url, false),
      });
    }
  }
  return items;
}
