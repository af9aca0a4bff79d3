// The public REST API under the same origin, with the SIWE session token (every seller route accepts it).
import { ApiError, newIdempotencyKey, requestJson } from '@paygate/browser-api';
import { WalletError } from './wallet';

export { ApiError, newIdempotencyKey };

export type Query = Record<string, string | number | undefined | null>;

interface RequestOptions {
  body?: unknown;
  query?: Query;
  /** Creating requests send one so a retried click never creates twice. */
  idempotencyKey?: string;
  /** Plain text instead of JSON (SKILL.md). */
  text?: boolean;
}

export interface ApiClient {
  request<T>(method: string, path: string, options?: RequestOptions): Promise<T>;
}

const TIMEOUT_MS = 15_000;

export function withQuery(path: string, query: Query = {}): string {
  const given = Object.entries(query).filter(
    ([, value]) => value !== undefined && value !== null && value !== '',
  );
  const search = new URLSearchParams(given.map(([key, value]) => [key, String(value)])).toString();
  return search ? `${path}?${search}` : path;
}

export function createApiClient(options: {
  baseUrl?: string;
  token: () => string | undefined;
  onUnauthorized?: (error: ApiError) => void;
  /** Told after each call whether Paygate answered it (false: no answer, a timeout or a 502/503/504). */
  onReachable?: (reachable: boolean, path: string) => void;
  fetch?: typeof fetch;
}): ApiClient {
  return {
    async request<T>(method: string, path: string, request: RequestOptions = {}): Promise<T> {
      const headers: Record<string, string> = { accept: request.text ? 'text/markdown' : 'application/json' };
      const token = options.token();
      if (token) headers.authorization = `Bearer ${token}`;
      if (request.body !== undefined) headers['content-type'] = 'application/json';
      if (request.idempotencyKey) headers['idempotency-key'] = request.idempotencyKey;
      try {
        const answer = await requestJson<T>(
          `${options.baseUrl ?? ''}${withQuery(path, request.query)}`,
          {
            method,
            headers,
            body: request.body !== undefined ? JSON.stringify(request.body) : undefined,
            credentials: 'omit',
          },
          { timeoutMs: TIMEOUT_MS, text: request.text, fetch: options.fetch },
        );
        options.onReachable?.(true, path);
        return answer;
      } catch (error) {
        if (error instanceof ApiError) {
          options.onReachable?.(error.status !== 0 && ![502, 503, 504].includes(error.status), path);
          if (error.status === 401) options.onUnauthorized?.(error);
        }
        throw error;
      }
    },
  };
}

/** A message for a person: what went wrong in plain words, with the API's (or the wallet's) own where it is clear. */
export function plainMessage(error: unknown): string {
  if (error instanceof WalletError) return error.message;
  if (!(error instanceof ApiError)) return 'Something went wrong. Try again.';
  if (error.status === 0) return error.message;
  if (error.status === 401) return 'Your session has ended. Sign in again.';
  if (error.status === 403) return 'You are not allowed to do this.';
  if (error.status === 404) return 'Not found: it may have been removed, or belongs to another account.';
  if (error.status === 429) return 'Too many requests. Wait a moment and try again.';
  if (error.status >= 500)
    return `Paygate had a problem handling this (${error.code}). Try again in a moment${
      error.requestId ? `; quote request id ${error.requestId} if it persists` : ''
    }.`;
  const field = error.field ? humanField(error.field) : '';
  return field ? `${field}: ${fieldRule(error)}` : error.message;
}

/** The API's messages usually start with the field's own name ("description must be …"): said once. */
function fieldRule(error: ApiError): string {
  const bare = error.field?.replace(/^\/|^body\./, '') ?? '';
  return bare && error.message.startsWith(`${bare} `) ? error.message.slice(bare.length + 1) : error.message;
}

/** `endpoints[0].priceUsdc` → "Endpoint 1 price". */
export function humanField(field: string): string {
  const names: Record<string, string> = {
    name: 'Name',
    displayName: 'Display name',
    description: 'Description',
    apiBaseUrl: 'API base URL',
    type: 'Type',
    mode: 'Mode',
    categories: 'Categories',
    durationDays: 'Duration (days)',
    requiresShipping: 'Requires shipping',
    holdPeriodHours: 'Hold period (hours)',
    path: 'Path',
    method: 'Method',
    priceUsdc: 'Price',
    amount: 'Amount',
    reason: 'Reason',
    payoutAddress: 'Payout address',
    webhookUrl: 'Webhook URL',
    settlementFrequency: 'Settlement frequency',
    minimumSettlement: 'Minimum settlement',
    checkoutMatching: 'Checkout payments',
    content: 'SKILL.md',
  };
  const match = /^endpoints\[(\d+)\]\.(\w+)$/.exec(field) ?? /^\/?endpoints\/(\d+)\/(\w+)$/.exec(field);
  if (match) return `Endpoint ${Number(match[1]) + 1} ${(names[match[2]!] ?? match[2]!).toLowerCase()}`;
  const key = field.replace(/^\/|^body\./, '');
  return names[key] ?? key;
}

/** A form's field errors: the API names one field and its rule per answer, said with the field's human name. */
export function fieldErrors(error: unknown): Record<string, string> {
  if (!(error instanceof ApiError) || !error.field) return {};
  const key = error.field.replace(/^\/|^body\./, '').replace(/\//g, '.');
  return { [key]: `${humanField(error.field)} ${fieldRule(error)}` };
}
