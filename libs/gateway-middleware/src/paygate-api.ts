/** Talks to Paygate with a timeout; every failure to reach it becomes PaygateUnavailableError (→ HTTP 500). */
export class PaygateUnavailableError extends Error {
  override name = 'PaygateUnavailableError';
}

export interface PaymentParameters {
  network: string;
  chainId: number;
  payTo: string;
  asset: string;
  confirmations: number;
  issuer: string;
  jwksUrl: string;
}

export class PaygateApi {
  private parameters: { value: PaymentParameters; fetchedAt: number } | undefined;

  constructor(
    readonly baseUrl: string,
    private readonly apiKey: string,
    private readonly timeoutMs: number,
    private readonly fetchImpl: typeof fetch,
  ) {}

  async request(path: string, init: RequestInit = {}): Promise<Response> {
    try {
      return await this.fetchImpl(`${this.baseUrl}${path}`, {
        ...init,
        signal: AbortSignal.timeout(this.timeoutMs),
      });
    } catch (error) {
      throw new PaygateUnavailableError(
        `Paygate at ${this.baseUrl} did not answer: ${(error as Error).message}`,
      );
    }
  }

  /** Network, escrow and USDC contract for 402 bodies; cached for 5 minutes. */
  async paymentParameters(): Promise<PaymentParameters> {
    if (this.parameters && Date.now() - this.parameters.fetchedAt < 300_000) return this.parameters.value;
    const res = await this.request('/api/verify', { method: 'GET' });
    if (!res.ok) throw new PaygateUnavailableError(`Paygate answered ${res.status} to GET /api/verify`);
    const value = (await res.json()) as PaymentParameters;
    this.parameters = { value, fetchedAt: Date.now() };
    return value;
  }

  async verify(body: Record<string, unknown>): Promise<Response> {
    return this.request('/api/verify', {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${this.apiKey}` },
      body: JSON.stringify(body),
    });
  }
}
