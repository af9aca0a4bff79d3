import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * `Paygate-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>`: the timestamp is signed, so
 * a captured delivery cannot be replayed later. Several `v1=` may appear (a secret rotation); one match is enough.
 */
export const WEBHOOK_SIGNATURE_HEADER = 'Paygate-Signature';
/** The event's stable id: the same on every retry and redelivery, so a receiver can drop duplicates. */
export const WEBHOOK_EVENT_ID_HEADER = 'Paygate-Event-Id';
export const WEBHOOK_EVENT_TYPE_HEADER = 'Paygate-Event-Type';
export const WEBHOOK_DEFAULT_TOLERANCE_SECONDS = 300;

/**
 * A webhook body: `id` (= Paygate-Event-Id), `event`, `createdAt`, the payload's fields at the top level and again
 * in `data`. Parse it only after verifyWebhook accepted the raw bytes.
 */
export type WebhookBody<Kind extends string, Fields extends object> = {
  id: string;
  event: Kind;
  createdAt: string;
  data: { event: Kind } & Fields;
} & Fields;

/** Top-level fields: event, transactionId, refundTxHash (the on-chain refund), amount (decimal USDC). */
export type RefundCompletedWebhook = WebhookBody<
  'refund.completed',
  {
    refundId: string;
    transactionId: string;
    sellerId: string;
    refundTxHash: string;
    amount: string;
    completedAt: string;
  }
>;
/**
 * A paid call you did not serve (5xx, timeout or unreachable until the retry window closed) was refunded without
 * your approval: `amount` leaves your balance. A 4xx you chose is service and never refunded.
 */
export type PaymentRefundedWebhook = WebhookBody<
  'payment.refunded',
  {
    refundId: string;
    transactionId: string;
    paymentId: string;
    sellerId: string;
    payer: string;
    amount: string;
    reason: 'unserved';
    upstreamOutcome: string;
    upstreamStatus: number | null;
    txHash: string;
    refundedAt: string;
  }
>;
/** Top-level fields: event, transactionId, reason. */
export type RefundRequestedWebhook = WebhookBody<
  'refund.requested',
  { refundRequestId: string; transactionId: string; sellerId: string; reason: string; requestedAt: string }
>;
/** The account wallet signed a new payout address, used from `effectiveAt`. Not you? Cancel it and secure the wallet. */
export type PayoutAddressChangeRequestedWebhook = WebhookBody<
  'seller.payout_address_change_requested',
  {
    sellerId: string;
    walletAddress: string;
    currentPayoutAddress: string;
    newPayoutAddress: string;
    requestedAt: string;
    effectiveAt: string;
  }
>;
/** The other kinds; their payloads are described in Paygate's OpenAPI document (`webhooks`). */
export type OtherWebhook = WebhookBody<
  | 'payment.confirmed'
  | 'payment.reversed'
  | 'settlement.completed'
  | 'checkout.session_created'
  | 'checkout.session_paid'
  | 'checkout.session_underpaid'
  | 'checkout.session_expired'
  | 'checkout.session_reopened'
  | 'checkout.session_refunded',
  Record<string, unknown>
>;
/** Any Paygate webhook body; `event` tells which. */
export type PaygateWebhookEvent =
  | RefundCompletedWebhook
  | PaymentRefundedWebhook
  | RefundRequestedWebhook
  | PayoutAddressChangeRequestedWebhook
  | OtherWebhook;

const MAX_HEADER_LENGTH = 2048;
const MAX_SIGNATURES = 8;

export type WebhookPayload = string | Buffer | Uint8Array;

export interface SignWebhookOptions {
  /** The exact bytes sent as the request body. */
  payload: WebhookPayload;
  secret: string;
  /** Unix seconds; defaults to now. */
  timestamp?: number;
}

/** Computes the hex HMAC-SHA256 of `<timestamp>.<payload>` with the seller's webhook secret. */
export function computeWebhookSignature(payload: WebhookPayload, secret: string, timestamp: number): string {
  return createHmac('sha256', secret)
    .update(`${timestamp}.`)
    .update(typeof payload === 'string' ? Buffer.from(payload, 'utf8') : payload)
    .digest('hex');
}

/** Returns the value of the `Paygate-Signature` header for a payload. */
export function signWebhook(options: SignWebhookOptions): string {
  if (!options.secret) throw new TypeError('signWebhook: secret is required');
  const timestamp = options.timestamp ?? Math.floor(Date.now() / 1000);
  if (!Number.isSafeInteger(timestamp) || timestamp < 0) {
    throw new TypeError('signWebhook: timestamp must be a non-negative integer of unix seconds');
  }
  return `t=${timestamp},v1=${computeWebhookSignature(options.payload, options.secret, timestamp)}`;
}

export type WebhookVerificationFailure =
  | 'missing_header'
  | 'malformed_header'
  | 'timestamp_outside_tolerance'
  | 'signature_mismatch';

export class WebhookVerificationError extends Error {
  override name = 'WebhookVerificationError';
  constructor(
    readonly reason: WebhookVerificationFailure,
    message: string,
  ) {
    super(message);
  }
}

export interface VerifyWebhookOptions {
  /** The raw request body, byte for byte as received (not a re-serialised JSON object). */
  payload: WebhookPayload;
  /** The `Paygate-Signature` header value. */
  header: string | string[] | undefined | null;
  secret: string;
  /** Largest accepted distance between the signed timestamp and now, in seconds (default 300). */
  toleranceSeconds?: number;
  /** Clock for tests. */
  now?: () => Date;
}

function parseHeader(header: string): { timestamp: number; signatures: string[] } | undefined {
  if (header.length > MAX_HEADER_LENGTH) return undefined;
  let timestamp: number | undefined;
  const signatures: string[] = [];
  for (const part of header.split(',')) {
    const index = part.indexOf('=');
    if (index <= 0) continue;
    const key = part.slice(0, index).trim();
    const value = part.slice(index + 1).trim();
    if (key === 't') {
      if (!/^\d{1,12}$/.test(value) || timestamp !== undefined) return undefined;
      timestamp = Number(value);
    } else if (key === 'v1' && /^[0-9a-f]{64}$/i.test(value) && signatures.length < MAX_SIGNATURES) {
      signatures.push(value.toLowerCase());
    }
  }
  if (timestamp === undefined || signatures.length === 0) return undefined;
  return { timestamp, signatures };
}

/** Verifies a webhook's signature (in constant time) and age; throws a WebhookVerificationError naming the reason. */
export function verifyWebhook(options: VerifyWebhookOptions): { timestamp: number } {
  if (!options.secret) throw new TypeError('verifyWebhook: secret is required');
  const raw = Array.isArray(options.header) ? options.header[0] : options.header;
  if (!raw) {
    throw new WebhookVerificationError('missing_header', `the ${WEBHOOK_SIGNATURE_HEADER} header is missing`);
  }
  const parsed = parseHeader(raw);
  if (!parsed) {
    throw new WebhookVerificationError(
      'malformed_header',
      `the ${WEBHOOK_SIGNATURE_HEADER} header must look like t=<unix seconds>,v1=<64 hex digits>`,
    );
  }
  const tolerance = options.toleranceSeconds ?? WEBHOOK_DEFAULT_TOLERANCE_SECONDS;
  const nowSeconds = Math.floor((options.now?.() ?? new Date()).getTime() / 1000);
  if (Math.abs(nowSeconds - parsed.timestamp) > tolerance) {
    throw new WebhookVerificationError(
      'timestamp_outside_tolerance',
      `the signed timestamp is more than ${tolerance} s from now (a replay or a wrong clock)`,
    );
  }
  const expected = Buffer.from(
    computeWebhookSignature(options.payload, options.secret, parsed.timestamp),
    'hex',
  );
  // Every candidate is compared, so timing does not reveal which one (if any) matched.
  const matches = parsed.signatures.map((signature) =>
    timingSafeEqual(expected, Buffer.from(signature, 'hex')),
  );
  if (!matches.includes(true)) {
    throw new WebhookVerificationError(
      'signature_mismatch',
      'the webhook signature does not match the payload',
    );
  }
  return { timestamp: parsed.timestamp };
}

/** Like verifyWebhook, but answers true or false instead of throwing. */
export function isValidWebhook(options: VerifyWebhookOptions): boolean {
  try {
    verifyWebhook(options);
    return true;
  } catch (error) {
    if (error instanceof WebhookVerificationError) return false;
    throw error;
  }
}
