import { Type } from '@sinclair/typebox';
import { Address, ClosedObject, Id, IsoTime, Literals, Nullable, UsdcAmount } from '../primitives';

export const SkillStatus = Literals([
  'PENDING_VALIDATION',
  'ACTIVE',
  'VALIDATION_FAILED',
  'SUSPENDED',
  'ARCHIVED',
]);
export const SkillType = Literals(['API', 'SaaS', 'Product', 'Service', 'Subscription', 'Content']);
export const SkillMode = Literals(['PROXY', 'TICKET']);
export const HttpMethod = Literals(['GET', 'POST', 'PUT', 'PATCH', 'DELETE']);

export const SkillEndpointSnapshot = ClosedObject({
  endpointId: Id,
  path: Type.String({ minLength: 1 }),
  method: HttpMethod,
  description: Type.String(),
  price: UsdcAmount,
  isHealthy: Type.Boolean(),
  active: Type.Boolean(),
});

/** A skill's serving state; consumers ignore a snapshot whose revision is not newer than theirs (redelivery). */
export const SkillUpdated = ClosedObject({
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
});

/** A unique amount (default), or a session's own address for buyers whose exchange cannot send odd sums. */
export const CHECKOUT_MATCHING_MODES = ['amount', 'deposit_address'] as const;
export type CheckoutMatchingMode = (typeof CHECKOUT_MATCHING_MODES)[number];
export const CheckoutMatching = Literals(CHECKOUT_MATCHING_MODES);

export const SettlementFrequency = Literals(['DAILY', 'WEEKLY', 'MONTHLY']);

/** A seller's public settings; the webhook secret never travels on the bus (registry.webhook_secret). */
export const SellerUpdated = ClosedObject({
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
  /** Absent: `amount`. */
  checkoutMatching: Type.Optional(CheckoutMatching),
  updatedAt: IsoTime,
});

/**
 * The account wallet signed a new payout address: a webhook, so the seller hears of a change it did not make;
 * payouts go to `currentPayoutAddress` until `effectiveAt`, when seller.updated carries the new one.
 */
export const PayoutAddressChangeRequested = ClosedObject({
  sellerId: Id,
  walletAddress: Address,
  currentPayoutAddress: Address,
  newPayoutAddress: Address,
  requestedAt: IsoTime,
  effectiveAt: IsoTime,
});
