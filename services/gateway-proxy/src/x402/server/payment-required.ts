import { formatUsdc, parseUsdc } from '@paygate/money';
import {
  type NetworkName,
  PAYMENT_HEADER,
  type PaymentKind,
  type PaymentRequirements,
} from '@paygate/protocol';
import { type Static, Type } from '@sinclair/typebox';
import type { GatewayProxyConfig } from '../../config';
import { REFUSAL_REASONS } from '../../reasons';
import { type EndpointSnapshot, paymentKindOf, type SkillSnapshot } from '../../skills/projection';

/** The 402 body, declared once: its type, the OpenAPI entry and the builder come from these schemas. */
const NETWORKS = ['base', 'base-sepolia', 'local'] as const satisfies readonly NetworkName[];
const KINDS = ['payPerCall', 'subscription', 'product', 'service'] as const satisfies readonly PaymentKind[];

/** x402 v1's part of the body, on Base networks only (v2's is the PAYMENT-REQUIRED header). */
const X402V1Fields = {
  x402Version: Type.Optional(Type.Literal(1)),
  accepts: Type.Optional(Type.Array(Type.Record(Type.String(), Type.Unknown()))),
};

export const PaymentRequirementsBody = Type.Object(
  {
    price: Type.String({ examples: ['0.05'] }),
    description: Type.String(),
    network: Type.Union(NETWORKS.map((network) => Type.Literal(network))),
    chainId: Type.Integer({ examples: [8453] }),
    payTo: Type.String({ description: 'escrow wallet' }),
    asset: Type.String({ description: 'USDC contract' }),
    resource: Type.String({ examples: ['GET https://paygate.example/api/v1/skills/weather/forecast'] }),
    confirmations: Type.Integer(),
    type: Type.Union(KINDS.map((kind) => Type.Literal(kind))),
    durationDays: Type.Optional(Type.Integer()),
    accessUrl: Type.Optional(Type.String()),
    requiresShipping: Type.Optional(Type.Boolean()),
    header: Type.Literal(PAYMENT_HEADER),
    mode: Type.Union([Type.Literal('PROXY'), Type.Literal('TICKET')]),
    skill: Type.String({ description: 'the skill name' }),
    endpoint: Type.Object({ method: Type.String(), path: Type.String() }),
  },
  {
    description: 'What to pay: the price, the network, the escrow wallet, the token, and the paid resource.',
  },
);
export type PaymentRequirementsBody = Static<typeof PaymentRequirementsBody>;

export const PaymentRequiredBody = Type.Intersect([PaymentRequirementsBody, Type.Object(X402V1Fields)], {
  description: 'HTTP 402 without a proof: what to pay (with x402 the PAYMENT-REQUIRED header too).',
});

export const PaymentRefusedBody = Type.Object(
  {
    error: Type.Literal('Invalid payment'),
    reason: Type.String({
      description: `${REFUSAL_REASONS.join(', ')}; x402 reason codes for x402 payments`,
    }),
    message: Type.String(),
    claimedBy: Type.Optional(
      Type.Union(
        ['x402', 'verify', 'checkout', 'operator_refund'].map((by) => Type.Literal(by)),
        {
          description:
            'with payment_already_used when another payment path spent the transfer (one on-chain transfer buys one thing)',
        },
      ),
    ),
    paid: Type.Optional(
      Type.String({ description: 'with insufficient_amount: what the transfer paid (USDC)' }),
    ),
    price: Type.Optional(Type.String({ description: 'with insufficient_amount: the price (USDC)' })),
    confirmations: Type.Optional(Type.Integer({ description: 'with insufficient_confirmations: so far' })),
    required: Type.Optional(Type.Integer({ description: 'with insufficient_confirmations: needed' })),
    requirements: PaymentRequirementsBody,
    ...X402V1Fields,
  },
  { description: 'HTTP 402 of a refused proof.' },
);

// Fails to compile unless every body built here is the SDKs' PaymentRequirements.
const asProtocolRequirements = (body: PaymentRequirementsBody): PaymentRequirements => body;
void asProtocolRequirements;

export function paymentRequirements(
  config: Pick<GatewayProxyConfig, 'network' | 'chainId' | 'escrowAddress' | 'usdcAddress' | 'confirmations'>,
  skill: SkillSnapshot,
  endpoint: EndpointSnapshot,
  resource: string,
): PaymentRequirementsBody {
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
