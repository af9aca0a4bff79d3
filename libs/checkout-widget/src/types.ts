export type CheckoutSessionStatus =
  | 'open'
  | 'paid'
  | 'paid_late'
  | 'underpaid'
  | 'overpaid'
  | 'expired'
  | 'refunded';

/** How a session's payment is told apart from every other: its exact amount, or its own address. */
export type CheckoutMatching = 'amount' | 'deposit_address';

/**
 * The public session object (GET /api/v1/checkout/sessions/:id, WebSocket `session` messages). Written out here
 * so the published types stand alone; test/types.unit.test.ts holds it equal to the contract (checkout.session_*).
 * Amounts are decimal USDC strings with at most six decimals; times are ISO 8601.
 */
export interface CheckoutSession {
  sessionId: string;
  sellerId: string;
  skillId: string | null;
  description: string;
  status: CheckoutSessionStatus;
  /**
   * What the buyer sends, always with six decimals. With `matching: 'amount'` it is the price plus a random suffix
   * below one cent (e.g. `1.504217` for a 1.50 price) and it alone identifies the payment: a different amount pays
   * nothing automatically. With `'deposit_address'` it is exactly the price.
   */
  exactAmount: string;
  paidAmount: string | null;
  /** Where the buyer sends it (never the agent escrow of 402 payments): the shared checkout wallet, or its own. */
  walletAddress: string;
  /**
   * What identifies the payment: its exact amount on the shared wallet (`amount`), or this session's own address
   * (`deposit_address`: for buyers whose exchange cannot send an odd amount, or a price whose unique amounts are
   * all held). Absent: read as `amount`.
   */
  matching?: CheckoutMatching;
  network: 'base' | 'base-sepolia' | 'local';
  chainId: number;
  tokenAddress: string;
  expiresAt: string;
  /** Until this time a payment of exactAmount still matches (recorded as paid_late after expiresAt). */
  lateUntil: string;
  txHash: string | null;
  payer: string | null;
  createdAt: string;
  updatedAt: string;
}

/**
 * What `onSuccess` receives, once, when the session is paid (status `paid`, `paid_late` or `overpaid`).
 * Amounts are decimal USDC strings with six decimals.
 */
export interface PaymentResult {
  sessionId: string;
  /**
   * The escrow ledger's id of this payment (`txn_…`): what the seller's records, refunds and webhooks name.
   * Looked up once the session is paid (the ledger books it a moment later; onSuccess waits up to about 4 s);
   * null if it could not be learned in time — a refund request can name the sessionId or txHash instead.
   */
  transactionId: string | null;
  status: 'paid' | 'paid_late' | 'overpaid';
  /** The on-chain USDC transfer that paid the session. */
  txHash: string;
  /** What was received (equals exactAmount unless overpaid). */
  amount: string;
  /** What the session asked for: the price plus its unique suffix (`amount`), or the price (`deposit_address`). */
  exactAmount: string;
  /** The paying wallet. */
  payer: string;
  /** The address that received the payment (the session's walletAddress: the checkout wallet, or its own). */
  walletAddress: string;
  network: CheckoutSession['network'];
  chainId: number;
  tokenAddress: string;
  sellerId: string;
  skillId: string | null;
  description: string;
  /** When Paygate recorded the payment (ISO 8601). */
  paidAt: string;
}

export type CheckoutErrorCode =
  | 'session_create_failed'
  | 'session_fetch_failed'
  | 'wallet_unavailable'
  | 'wallet_rejected'
  | 'wallet_failed'
  | 'underpaid';

export interface CheckoutError {
  code: CheckoutErrorCode | string;
  message: string;
  /** The session, once one exists. */
  session?: CheckoutSession;
}

/** The minimal EIP-1193 provider the widget uses (window.ethereum by default). */
export interface Eip1193Provider {
  request(args: { method: string; params?: unknown[] | object }): Promise<unknown>;
}

export interface CheckoutOptions {
  /** The seller's publishable key (pk_…), sent as Authorization: Bearer pk_… . */
  publishableKey: string;
  /** The skill (its URL slug) whose price the session charges. */
  skill: string;
  /** Which endpoint of the skill; required when the skill has several. */
  endpointId?: string;
  /** Paygate's base URL; defaults to the origin the script was loaded from, else the page's origin. */
  baseUrl?: string;
  /** Text of the pay button. */
  buttonLabel?: string;
  onSuccess?: (result: PaymentResult) => void;
  /** The session expired before it was paid. */
  onExpired?: (session: CheckoutSession) => void;
  onError?: (error: CheckoutError) => void;
  /** Every status the widget sees (for custom UIs and analytics). */
  onStatusChange?: (session: CheckoutSession) => void;
  /** The wallet behind "Pay with browser wallet"; defaults to window.ethereum. */
  ethereum?: Eip1193Provider | null;
  /** Polling period when the WebSocket is unavailable. */
  pollIntervalMs?: number;
  /** Set false to skip the WebSocket and poll from the start. */
  webSocket?: boolean;
}
