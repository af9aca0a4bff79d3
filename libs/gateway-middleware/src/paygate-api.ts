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

  private post(path: string, body: unknown, timeoutMs?: number): Promise<Response> {
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

  /** Paygate's own proof (X-402-Payment), checked and claimed for this seller. */
  verify(body: Record<string, unknown>): Promise<Response> {
    return this.post('/api/verify', body);
  }

  /** x402's sign-in-with-x: the subscription of the wallet that signed the message, if it has one here. */
  verifySignIn(body: Record<string, unknown>): Promise<Response> {
    return this.post('/api/verify/sign-in', body);
  }

  /** An x402 payment settled into escrow by Paygate's facilitator, credited to this seller. */
  settleX402(body: Record<string, unknown>, timeoutMs: number): Promise<Response> {
    return this.post('/api/v1/x402/settle', body, timeoutMs);
  }
}
