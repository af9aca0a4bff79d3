import type { CheckoutSession } from './types';

const REQUEST_TIMEOUT_MS = 10_000;

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    /** The request field the API names, when it names one. */
    readonly field?: string,
  ) {
    super(message);
  }
}

async function call(url: string, init: RequestInit): Promise<CheckoutSession> {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), REQUEST_TIMEOUT_MS);
  try {
    const response = await fetch(url, { ...init, signal: controller.signal });
    const body = (await response.json().catch(() => ({}))) as {
      error?: { code?: string; message?: string };
    };
    if (!response.ok) {
      throw new ApiError(
        response.status,
        body.error?.code ?? 'http_error',
        body.error?.message ?? `request failed with status ${response.status}`,
      );
    }
    return body as unknown as CheckoutSession;
  } catch (error) {
    if (error instanceof ApiError) throw error;
    throw new ApiError(0, 'network_error', `cannot reach Paygate: ${(error as Error).message}`);
  } finally {
    clearTimeout(timer);
  }
}

function randomKey(): string {
  const bytes = new Uint8Array(16);
  crypto.getRandomValues(bytes);
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

/** POST /api/v1/checkout/sessions with the publishable key; a retried click reuses its Idempotency-Key. */
export function createSession(
  baseUrl: string,
  publishableKey: string,
  body: { skill: string; endpointId?: string },
  idempotencyKey: string = randomKey(),
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

/**
 * The escrow ledger's transactionId of a paid session (GET /api/v1/transactions/lookup, public). The ledger books
 * the payment a moment after checkout marks the session paid, so `transaction_not_found` is asked again a few
 * times (bounded: about 4 s); anything else, or no answer in time, is null.
 */
export async function lookupTransactionId(baseUrl: string, sessionId: string): Promise<string | null> {
  for (let attempt = 0; attempt < LOOKUP_ATTEMPTS; attempt++) {
    if (attempt > 0) await new Promise((resolve) => setTimeout(resolve, LOOKUP_DELAY_MS));
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), LOOKUP_TIMEOUT_MS);
    try {
      const response = await fetch(
        `${baseUrl}/api/v1/transactions/lookup?sessionId=${encodeURIComponent(sessionId)}`,
        { signal: controller.signal },
      );
      const body = (await response.json().catch(() => ({}))) as {
        transactionId?: string;
        error?: { code?: string };
      };
      if (response.ok && typeof body.transactionId === 'string') return body.transactionId;
      if (body.error?.code !== 'transaction_not_found') return null;
    } catch {
      return null;
    } finally {
      clearTimeout(timer);
    }
  }
  return null;
}
