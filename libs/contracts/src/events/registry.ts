import { Type } from '@sinclair/typebox';
import { Address, Id, IsoTime, Nullable, UsdcAmount } from '../primitives';

export const SkillStatus = Type.Union([
  Type.Literal('PENDING_VALIDATION'),
  Type.Literal('ACTIVE'),
  Type.Literal('VALIDATION_FAILED'),
  Type.Literal('SUSPENDED'),
  Type.Literal('ARCHIVED'),
]);
export const SkillType = Type.Union([
  Type.Literal('API'),
  Type.Literal('SaaS'),
  Type.Literal('Product'),
  Type.Literal('Service'),
  Type.Literal('Subscription'),
  Type.Literal('Content'),
]);
export const SkillMode = Type.Union([Type.Literal('PROXY'), Type.Literal('TICKET')]);
export const HttpMethod = Type.Union([
  Type.Literal('GET'),
  Type.Literal('POST'),
  Type.Literal('PUT'),
  Type.Literal('PATCH'),
  Type.Literal('DELETE'),
]);

export const SkillEndpointSnapshot = Type.Object(
  {
    endpointId: Id,
    path: Type.String({ minLength: 1 }),
    method: HttpMethod,
    description: Type.String(),
    price: UsdcAmount,
    isHealthy: Type.Boolean(),
    active: Type.Boolean(),
  },
  { additionalProperties: false },
);

/**
 * The whole serving-relevant state of a skill after any change. Consumers keep projections keyed by skillId
 * and ignore a snapshot whose revision is not newer than the one they hold (redelivery, reordering).
 */
export const SkillUpdated = Type.Object(
  {
    skillId: Id,
    sellerId: Id,
    revision: Type.Integer({ minimum: 1 }),
    name: Type.String(),
    displayName: Type.String(),
    description: Type.String(),
    type: SkillType,
    mode: SkillMode,
    status: SkillStatus,
    apiBaseUrl: Type.String(),
    categories: Type.Array(Type.String()),
    durationDays: Nullable(Type.Integer()),
    requiresShipping: Nullable(Type.Boolean()),
    holdPeriodHours: Type.Integer({ minimum: 0, maximum: 168 }),
    endpoints: Type.Array(SkillEndpointSnapshot),
    updatedAt: IsoTime,
  },
  { additionalProperties: false },
);

/**
 * How a seller's checkout sessions are told apart. `amount` (the default, as the specification describes): each
 * session gets a unique exact amount (price + a sub-cent suffix) on the one checkout wallet. `deposit_address`: each
 * session gets its own deposit address at exactly its price, for buyers whose exchange cannot send an odd amount.
 */
export const CHECKOUT_MATCHING_MODES = ['amount', 'deposit_address'] as const;
export type CheckoutMatchingMode = (typeof CHECKOUT_MATCHING_MODES)[number];
export const CheckoutMatching = Type.Union(CHECKOUT_MATCHING_MODES.map((mode) => Type.Literal(mode)));

export const SettlementFrequency = Type.Union([
  Type.Literal('DAILY'),
  Type.Literal('WEEKLY'),
  Type.Literal('MONTHLY'),
]);

/**
 * A seller's public settings after any change. The webhook signing secret never travels on the bus:
 * notifier asks the registry for it by request-reply when `webhookSecretVersion` changes.
 */
export const SellerUpdated = Type.Object(
  {
    sellerId: Id,
    revision: Type.Integer({ minimum: 1 }),
    walletAddress: Address,
    payoutAddress: Address,
    publishableKey: Type.String(),
    apiKeyVersion: Type.Integer({ minimum: 1 }),
    webhookUrl: Nullable(Type.String()),
    webhookSecretVersion: Type.Integer({ minimum: 0 }),
    settlementFrequency: SettlementFrequency,
    minimumSettlement: UsdcAmount,
    /** Absent (a registry from before the setting): `amount`. */
    checkoutMatching: Type.Optional(CheckoutMatching),
    updatedAt: IsoTime,
  },
  { additionalProperties: false },
);

/**
 * The seller asked (with a fresh signature by its account wallet) to send its payouts to a new address. Sent as
 * a webhook so the seller hears of a change it did not make; settlement keeps paying `currentPayoutAddress`
 * until `effectiveAt` (PAYOUT_ADDRESS_DELAY), when seller.updated carries the new address.
 */
export const PayoutAddressChangeRequested = Type.Object(
  {
    sellerId: Id,
    walletAddress: Address,
    currentPayoutAddress: Address,
    newPayoutAddress: Address,
    requestedAt: IsoTime,
    effectiveAt: IsoTime,
  },
  { additionalProperties: false },
);
