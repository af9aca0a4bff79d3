/** Hours a payment stays in escrow, by what is sold. No imports: the dashboard bundles this file alone. */
export const DEFAULT_HOLD_HOURS = {
  API: 0,
  Content: 0,
  SaaS: 24,
  Subscription: 24,
  Service: 48,
  Product: 72,
} as const satisfies Record<string, number>;

/** The same rule by payment kind (for /api/verify, which sells no registered skill). */
export const DEFAULT_HOLD_HOURS_BY_KIND = {
  payPerCall: DEFAULT_HOLD_HOURS.API,
  subscription: DEFAULT_HOLD_HOURS.Subscription,
  product: DEFAULT_HOLD_HOURS.Product,
  service: DEFAULT_HOLD_HOURS.Service,
} as const satisfies Record<string, number>;
