/**
 * How long a payment stays in escrow before it can be settled to the seller, by what the skill sells (docs/api.md,
 * "Skills", `holdPeriodHours`): the registry's default for a new skill, the dashboard's form and the gateway's /api/verify (which sells
 * no registered skill, by payment kind) all read it here. No imports: the dashboard bundles this file alone
 * (`@paygate/contracts/holds`).
 */
export const DEFAULT_HOLD_HOURS = {
  API: 0,
  Content: 0,
  SaaS: 24,
  Subscription: 24,
  Service: 48,
  Product: 72,
} as const satisfies Record<string, number>;

/** The same rule by payment kind (what a pay-per-call, subscription, product or service payment buys). */
export const DEFAULT_HOLD_HOURS_BY_KIND = {
  payPerCall: DEFAULT_HOLD_HOURS.API,
  subscription: DEFAULT_HOLD_HOURS.Subscription,
  product: DEFAULT_HOLD_HOURS.Product,
  service: DEFAULT_HOLD_HOURS.Service,
} as const satisfies Record<string, number>;
