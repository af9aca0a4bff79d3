import { resolvePaygateUrl } from './paygate-url';
import type { GatewayConfig } from './types';

/** Talks to Paygate with a timeout; every failure to reach it becomes PaygateUnavailableError (→ HTTP 500). */
export class PaygateUnavailableError extends Error {
  override name = 'PaygateUnavailableError';
}

export class PaygateApi {
  constructor(
    readonly baseUrl: string,
    private readonly apiKey: string,
    private readonly timeoutMs: number,
    private readonly fetchImpl: typeof fetch,
  ) {}

  async request(path: string, init: RequestInit = {}, timeoutMs = this.timeoutMs): Promise<Response> {
    try {
      return await this.fetchImpl(`${this.baseUrl}${path}`, {
        ...init,
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch (error) {
      throw new PaygateUnavailableError(
        `Paygate at ${this.baseUrl} did not answer: ${(error as Error).message}`,
      );
    }
  }

  /** A seller call: `/api/verify`, `/api/verify/sign-in` or `/api/v1/x402/settle`, with the API key. */
  post(path: string, body: unknown, timeoutMs?: number): Promise<Response> {
    return this.request(
      path,
      {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${this.apiKey}` },
        body: JSON.stringify(body),
      },
      timeoutMs,
    );
  }
}

/** The API of the seller a configuration names (`caller` names the function in its errors). */
export function sellerApi(
  config: Pick<GatewayConfig, 'apiKey' | 'apiBaseUrl' | 'timeoutMs' | 'fetch'>,
  caller: string,
): PaygateApi {
  if (typeof config?.apiKey !== 'string' || !config.apiKey.startsWith('sk_')) {
    throw new TypeError(`${caller}: apiKey must be the sk_… key from the dashboard`);
  }
  const url = resolvePaygateUrl(config.apiBaseUrl, `${caller}: apiBaseUrl`);
  return new PaygateApi(url, config.apiKey, config.timeoutMs ?? 5000, config.fetch ?? fetch);
}
