import { parseUsdc } from '@paygate/money';
import { requirementsV2, type SettleResponse } from '@paygate/protocol';
import { PaygateUnavailableError, sellerApi } from './paygate-api';
import { PaymentParametersSource, usdcDomainOf } from './payment-parameters';
import type { GatewayConfig } from './types';

/** What one paid thing costs, as x402 names it (`mcp://tool/<name>`, or a URL). */
export interface X402Sale {
  /** Decimal USDC ("0.05"); at least 0.01 (Paygate's relaying minimum). */
  price: string;
  resourceUrl: string;
  description: string;
}

/** x402's PaymentRequired (v2). */
export interface X402PaymentRequired {
  x402Version: 2;
  error: string;
  resource: { url: string; description: string; mimeType: string };
  accepts: Array<ReturnType<typeof requirementsV2>>;
}

export type X402Settlement =
  | { ok: true; response: SettleResponse & { success: true }; network: string }
  | {
      ok: false;
      /** 402: refused (x402 reason); 429: rate limited; 503: Paygate could not settle now, present it again. */
      status: 402 | 429 | 503;
      reason: string;
      message: string;
      response?: SettleResponse;
    };

export interface X402Seller {
  /** The requirements for a sale; undefined while Paygate cannot be reached and nothing is pinned. */
  paymentRequired(sale: X402Sale, error?: string): Promise<X402PaymentRequired | undefined>;
  /** Settles a PaymentPayload into escrow through Paygate's facilitator, credited to the key's seller. */
  settle(paymentPayload: unknown, sale: X402Sale): Promise<X402Settlement>;
}

export type X402SellerConfig = Pick<
  GatewayConfig,
  'apiKey' | 'apiBaseUrl' | 'network' | 'escrowAddress' | 'usdcAddress' | 'timeoutMs' | 'fetch'
> & { maxTimeoutSeconds?: number; settleTimeoutMs?: number };

/** A sale's x402 requirements under Paygate's parameters (its escrow as payTo); undefined while unknown. */
async function saleRequirements(
  parameters: PaymentParametersSource,
  sale: X402Sale,
  maxTimeoutSeconds: number,
) {
  const p = await parameters.get();
  if (!p) return undefined;
  const eip712 = usdcDomainOf(p.chainId);
  if (!eip712) throw new TypeError(`createX402Seller: no USDC EIP-712 domain known for chain ${p.chainId}`);
  const resource = { url: sale.resourceUrl, description: sale.description, mimeType: 'application/json' };
  const amountMicro = parseUsdc(sale.price);
  return {
    network: p.network,
    resource,
    requirements: requirementsV2({ ...p, eip712, amountMicro, maxTimeoutSeconds, resource }),
  };
}

/** Paygate's answer to POST /api/v1/x402/settle as a settlement; throws when Paygate failed otherwise. */
async function settlementOf(answer: Response, network: string): Promise<X402Settlement> {
  const body = (await answer.json().catch(() => ({}))) as Partial<SettleResponse> & {
    error?: { code?: string; message?: string; field?: string };
  };
  if (answer.status === 429 || answer.status === 503) {
    const message = body.errorMessage ?? 'Paygate could not settle the payment now; present it again';
    return { ok: false, status: answer.status, reason: body.errorReason ?? 'unavailable', message };
  }
  if (answer.status === 400) {
    // The payload did not even have x402's shape (Paygate names the field).
    const message = body.error?.message ?? 'the payment payload is not an x402 PaymentPayload';
    return { ok: false, status: 402, reason: 'invalid_payload', message };
  }
  if (!answer.ok) {
    throw new PaygateUnavailableError(`Paygate answered ${answer.status} to POST /api/v1/x402/settle`);
  }
  if (!body.success) {
    const reason = body.errorReason ?? 'settlement_failed';
    const message = body.errorMessage ?? 'not settled';
    return { ok: false, status: 402, reason, message, response: body as SettleResponse };
  }
  return { ok: true, response: body as SettleResponse & { success: true }, network };
}

/** x402 selling outside HTTP routes (MCP tools, queues…), under the same rules as createGateway's x402. */
export function createX402Seller(config: X402SellerConfig): X402Seller {
  const api = sellerApi(config, 'createX402Seller');
  const parameters = new PaymentParametersSource(api, config);
  parameters.prefetch();
  const maxTimeoutSeconds = config.maxTimeoutSeconds ?? 300;
  const settleTimeoutMs = config.settleTimeoutMs ?? 30_000;

  return {
    async paymentRequired(sale, error = 'payment required') {
      const found = await saleRequirements(parameters, sale, maxTimeoutSeconds);
      if (!found) return undefined;
      return { x402Version: 2, error, resource: found.resource, accepts: [found.requirements] };
    },

    async settle(paymentPayload, sale) {
      const found = await saleRequirements(parameters, sale, maxTimeoutSeconds);
      if (!found) throw new PaygateUnavailableError('payment parameters unknown: Paygate unreachable');
      const paymentRequirements = { ...found.requirements, resource: sale.resourceUrl };
      const body = { x402Version: 2, paymentPayload, paymentRequirements };
      const answer = await api.post('/api/v1/x402/settle', body, settleTimeoutMs);
      return settlementOf(answer, found.network);
    },
  };
}
