import {
  type AnyRoute,
  addressBucket,
  defineRoute,
  rateLimitMiddleware,
  type SharedRateLimiter,
} from '@paygate/http';
import { parseUsdc } from '@paygate/money';
import { caip2, requirementsV2 } from '@paygate/protocol';
import { Type } from '@sinclair/typebox';
import type { Kysely } from 'kysely';
import type { GatewayProxyConfig } from '../../config';
import type { GatewayDatabase } from '../../db';
import { paymentKindOf, type SkillSnapshot } from '../../skills/projection';
import type { X402Payments } from '../mechanisms/exact-evm/payments';
import { bazaarExtension } from './bazaar';

interface DiscoveryDeps {
  config: GatewayProxyConfig;
  db: Kysely<GatewayDatabase>;
  limiter: SharedRateLimiter;
  x402: Pick<X402Payments, 'tokenDomain' | 'offer'>;
}

/** Public, so rate-limited per client address. */
export function discoveryRoute(deps: DiscoveryDeps): AnyRoute {
  const { config } = deps;
  const perClient = [
    rateLimitMiddleware(
      deps.limiter,
      (req) => `discovery:${addressBucket(req.ip ?? '')}`,
      'discovery requests per minute per client address',
    ),
  ];
  return defineRoute({
    method: 'get',
    path: '/api/v1/x402/discovery/resources',
    summary: 'Every active Paygate skill endpoint, in the x402 Bazaar discovery shape',
    query: Type.Object({
      type: Type.Optional(Type.String({ maxLength: 16 })),
      network: Type.Optional(Type.String({ maxLength: 64, description: 'CAIP-2 network, e.g. eip155:8453' })),
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
      const matches =
        (!type || type === 'http') &&
        (!scheme || scheme === 'exact') &&
        (!network || network === caip2(config.chainId)) &&
        (!payTo || payTo.toLowerCase() === config.escrowAddress.toLowerCase()) &&
        wanted.every((key) => key === 'bazaar');
      const items = matches ? await discoveryItems(deps) : [];
      res.setHeader('Access-Control-Allow-Origin', '*');
      res.json({
        x402Version: 2,
        items: items.slice(offset, offset + limit),
        pagination: { limit, offset, total: items.length },
      });
    },
  });
}

const MAX_DISCOVERY_SKILLS = 5000;

async function discoveryItems(deps: DiscoveryDeps) {
  const rows = (await deps.db
    .selectFrom('skills')
    .select(['snapshot', 'updated_at'])
    .orderBy('name')
    .limit(MAX_DISCOVERY_SKILLS)
    .execute()) as Array<{ snapshot: SkillSnapshot; updated_at: Date }>;
  // Read once here: `offer` itself never waits for the token's domain.
  await deps.x402.tokenDomain();
  const items = [];
  for (const { snapshot: skill, updated_at } of rows) {
    if (skill.status !== 'ACTIVE') continue;
    for (const endpoint of skill.endpoints) {
      if (!endpoint.active) continue;
      const url = `${deps.config.publicBaseUrl}/api/v1/skills/${skill.name}${endpoint.path}`;
      const description = `${skill.displayName}: ${endpoint.description || skill.description}`;
      const offer = deps.x402.offer({ url, description, priceMicro: parseUsdc(endpoint.price) });
      // Below the relayer's minimum: paid with X-402-Payment only, not listed.
      if (!offer) continue;
      items.push({
        resource: url,
        type: 'http',
        x402Version: 2,
        accepts: [requirementsV2(offer)],
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
