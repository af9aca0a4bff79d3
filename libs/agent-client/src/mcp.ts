import { formatUsdc } from '@paygate/money';
import { getAddress, hexlify, randomBytes, type Signer } from 'ethers';

/** x402's MCP transport: the payment in the call's `_meta`, the settlement in the result's. */
export const MCP_PAYMENT_META = 'x402/payment';
export const MCP_PAYMENT_RESPONSE_META = 'x402/payment-response';

/** What `callTool` needs of an MCP client (@modelcontextprotocol/sdk's Client fits). */
export interface McpToolClient {
  callTool(params: McpToolCall, ...rest: any[]): Promise<any>;
}

export interface McpToolCall {
  name: string;
  arguments?: Record<string, unknown>;
  _meta?: Record<string, unknown>;
}

interface ExactRequirements {
  scheme: string;
  network: string;
  amount: string;
  asset: string;
  payTo: string;
  maxTimeoutSeconds: number;
  extra?: { name?: string; version?: string };
}

export interface McpPaymentRequired {
  x402Version: 2;
  error?: string;
  resource?: { url: string; description?: string; mimeType?: string };
  accepts: ExactRequirements[];
}

const isPaymentRequired = (value: unknown): value is McpPaymentRequired =>
  typeof value === 'object' &&
  value !== null &&
  (value as { x402Version?: unknown }).x402Version === 2 &&
  Array.isArray((value as { accepts?: unknown }).accepts);

/**
 * The PaymentRequired a tool result carries, in x402's order: `structuredContent`, its `x402/error` wrapper,
 * then the JSON of `content[0].text`; undefined for any other result.
 */
export function paymentRequiredOf(result: unknown): McpPaymentRequired | undefined {
  const r = result as { isError?: boolean; structuredContent?: unknown; content?: Array<{ text?: unknown }> };
  if (r?.isError !== true) return undefined;
  if (isPaymentRequired(r.structuredContent)) return r.structuredContent;
  const wrapped = (r.structuredContent as { 'x402/error'?: { data?: unknown } } | undefined)?.['x402/error']
    ?.data;
  if (isPaymentRequired(wrapped)) return wrapped;
  const text = r.content?.[0]?.text;
  if (typeof text !== 'string') return undefined;
  try {
    const parsed = JSON.parse(text) as unknown;
    if (isPaymentRequired(parsed)) return parsed;
    const data = (parsed as { 'x402/error'?: { data?: unknown } })?.['x402/error']?.data;
    return isPaymentRequired(data) ? data : undefined;
  } catch {
    return undefined;
  }
}

const AUTHORIZATION_TYPES = {
  TransferWithAuthorization: [
    { name: 'from', type: 'address' },
    { name: 'to', type: 'address' },
    { name: 'value', type: 'uint256' },
    { name: 'validAfter', type: 'uint256' },
    { name: 'validBefore', type: 'uint256' },
    { name: 'nonce', type: 'bytes32' },
  ],
};

/** The `exact` requirement on the wallet's chain, or undefined when the tool asks for nothing this wallet can pay. */
export function pickRequirement(
  required: McpPaymentRequired,
  chainId: number,
): ExactRequirements | undefined {
  return required.accepts.find(
    (r) => r.scheme === 'exact' && r.network === `eip155:${chainId}` && /^[0-9]{1,30}$/.test(r.amount),
  );
}

/** An x402 PaymentPayload: the wallet's EIP-3009 authorization of exactly the amount to payTo (no gas). */
export async function signMcpPayment(
  wallet: Signer,
  chainId: number,
  required: McpPaymentRequired,
  requirement: ExactRequirements,
  nowSeconds = Math.floor(Date.now() / 1000),
): Promise<Record<string, unknown>> {
  if (!requirement.extra?.name || !requirement.extra.version) {
    throw new Error('the requirement names no EIP-712 domain (extra.name, extra.version) for the token');
  }
  const authorization = {
    from: getAddress(await wallet.getAddress()),
    to: getAddress(requirement.payTo),
    value: requirement.amount,
    validAfter: String(nowSeconds - 60),
    validBefore: String(nowSeconds + Math.max(30, Math.min(requirement.maxTimeoutSeconds, 3600))),
    nonce: hexlify(randomBytes(32)),
  };
  const signature = await wallet.signTypedData(
    {
      name: requirement.extra.name,
      version: requirement.extra.version,
      chainId,
      verifyingContract: getAddress(requirement.asset),
    },
    AUTHORIZATION_TYPES,
    authorization,
  );
  return {
    x402Version: 2,
    ...(required.resource ? { resource: required.resource } : {}),
    accepted: requirement,
    payload: { signature, authorization },
  };
}

/** The price of a requirement in decimal USDC (the amount is micro-USDC). */
export const priceOf = (requirement: ExactRequirements): string => formatUsdc(BigInt(requirement.amount));
