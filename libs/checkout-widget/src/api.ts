import { ApiError, newIdempotencyKey, requestJson } from '@paygate/browser-api';
import type { CheckoutSession } from './types';

const REQUEST_TIMEOUT_MS = 10_000;

export { ApiError, newIdempotencyKey };

function call(url: string, init: RequestInit): Promise<CheckoutSession> {
  return requestJson<CheckoutSession>(url, init, { timeoutMs: REQUEST_TIMEOUT_MS });
}

/** POST /api/v1/checkout/sessions with the publishable key; a retried click reuses its Idempotency-Key. */
export function createSession(
  baseUrl: string,
  publishableKey: string,
  body: { skill: string; endpointId?: string },
  idempotencyKey: string = newIdempotencyKey(),
): Promise<CheckoutSession> {
  return call(`${baseUrl}/api/v1/checkout/sessions`, {
    method: 'POST',
    headers: {
      Authorization: `Bearer ${publishableKey}`,
      'Content-Type': 'application/json',
      'Idempotency-Key': idempotencyKey,
    },
    body: JSON.stringify(body),
  });
}

export function getSession(baseUrl: string, sessionId: string): Promise<CheckoutSession> {
  return call(`${baseUrl}/api/v1/checkout/sessions/${encodeURIComponent(sessionId)}`, {
    method: 'GET',
    cache: 'no-store',
  });
}

const LOOKUP_ATTEMPTS = 8;
const LOOKUP_DELAY_MS = 500;
const LOOKUP_TIMEOUT_MS = 3000;

/** A paid session's transactionId: the ledger books it a moment later, so asked for about 4 s, else null. */
export async function lookupTransactionId(baseUrl: string, sessionId: string): Promise<string | null> {
  for (let attempt = 0; attempt < LOOKUP_ATTEMPTS; attempt++) {
    if (attempt > 0) await new Promise((resolve) => setTimeout(resolve, LOOKUP_DELAY_MS));
    try {
      const body = await requestJson<{ transactionId?: string }>(
        `${baseUrl}/api/v1/transactions/lookup?sessionId=${encodeURIComponent(sessionId)}`,
        {},
        { timeoutMs: LOOKUP_TIMEOUT_MS },
      );
      return typeof body.transactionId === 'string' ? body.transactionId : null;
    } catch (error) {
      if (!(error instanceof ApiError) || error.code !== 'transaction_not_found') return null;
    }
  }
  return null;
}
