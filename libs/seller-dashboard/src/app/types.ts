/** The fields the dashboard reads of the public API's answers (see each service's README / OpenAPI document). */

export type SkillType = 'API' | 'SaaS' | 'Product' | 'Service' | 'Subscription' | 'Content';
export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

export interface Endpoint {
  endpointId: string;
  path: string;
  method: HttpMethod;
  description: string;
  priceUsdc: string;
  isHealthy: boolean;
  active: boolean;
  url: string;
}

export interface Skill {
  skillId: string;
  name: string;
  displayName: string;
  description: string;
  apiBaseUrl: string;
  type: SkillType;
  mode: 'PROXY' | 'TICKET';
  categories: string[];
  durationDays: number | null;
  requiresShipping: boolean | null;
  holdPeriodHours: number;
  status: 'PENDING_VALIDATION' | 'ACTIVE' | 'VALIDATION_FAILED' | 'SUSPENDED' | 'ARCHIVED';
  statusReason: string | null;
  skillMdUrl: string;
  skillMdVersion: string;
  skillMdSource: 'generated' | 'manual';
  endpoints: Endpoint[];
}

export interface Account {
  sellerId: string;
  walletAddress: string;
  /** Where payouts go now. */
  payoutAddress: string;
  /** A change the wallet signed, paid to from effectiveAt on. */
  pendingPayoutAddress: { address: string; effectiveAt: string } | null;
  /** The API key replaced by the last rotation works until then. */
  previousApiKeyExpiresAt: string | null;
  /** The current secret key, described (the key itself is shown only once). */
  apiKey: ApiKeyInfo;
  /** The key replaced by the last rotation, while its overlap lasts. */
  previousApiKey: (ApiKeyInfo & { expiresAt: string }) | null;
  publishableKey: string;
  apiKeyVersion: number;
  webhookUrl: string | null;
  webhookSecretVersion: number;
  settlementFrequency: 'DAILY' | 'WEEKLY' | 'MONTHLY';
  minimumSettlement: string;
  /** How checkout sessions are told apart: a unique exact amount on the checkout wallet, or an address each. */
  checkoutMatching: 'amount' | 'deposit_address';
}

export interface SignInResult {
  sessionToken: string;
  expiresAt: string;
  seller: Account;
  apiKey?: string;
  publishableKey: string;
}

export type Balances = Record<'held' | 'available' | 'settling' | 'settled' | 'owed', string>;

export interface Transaction {
  transactionId: string;
  status: string;
  escrowStatus: string;
  amount: string;
  sellerAmount: string;
  platformFee: string;
  refundedAmount: string;
  refundableAmount: string;
  payer: string;
  source: string;
  skillName: string | null;
  network: string;
  chainId: number;
  txHash: string;
  logIndex: number;
  holdUntil: string | null;
  settlementId: string | null;
  confirmedAt: string;
  /** What became of the paid call (escrow-ledger; absent from an older API: served). */
  callStatus?: 'served' | 'failed_retryable' | 'failed';
  callFailedAt?: string | null;
  upstreamOutcome?: 'error_status' | 'timeout' | 'unreachable' | 'misconfigured' | null;
  upstreamStatus?: number | null;
  retryUntil?: string | null;
  callRecoveredAt?: string | null;
}

export interface Refund {
  refundId: string;
  amount: string;
  status: string;
  reason: string;
  refundTxHash: string | null;
  remainingRefundable?: string;
}

export interface TransactionDetail extends Transaction {
  history: Array<{ type: string; amount?: string; at: string }>;
  refunds: Refund[];
}

export interface RefundRequest {
  refundRequestId: string;
  transactionId: string;
  reason: string;
  status: string;
  createdAt?: string;
  refund?: Refund | null;
}

export interface Settlement {
  settlementId: string;
  status: string;
  amount: string | null;
  availableAmount: string | null;
  txHash: string | null;
  period: { key: string; start: string; end: string };
  skipReason: string | null;
  failureReason: string | null;
}

export interface DeliveryAttempt {
  number: number;
  attemptedAt: string;
  durationMs: number;
  statusCode: number | null;
  outcome: string;
  error: string | null;
  responseExcerpt: string | null;
}

export interface Delivery {
  id: string;
  eventType: string;
  url: string;
  /** The endpoint it went to; null: the account's webhook URL. */
  endpointId?: string | null;
  status: string;
  attemptCount: number;
  nextAttemptAt: string | null;
  lastError: string | null;
  redeliveryOf: string | null;
  createdAt: string;
  attempts: DeliveryAttempt[];
}

export interface Page<T> {
  data: T[];
  nextCursor: string | null;
}

interface ApiKeyInfo {
  name: string;
  /** The key's last four characters (null for keys made before they were kept). */
  hint: string | null;
  createdAt: string | null;
  lastUsedAt: string | null;
}

export interface WebhookEndpoint {
  id: string;
  url: string;
  description: string;
  events: string[];
  enabled: boolean;
  secretVersion: number;
}
