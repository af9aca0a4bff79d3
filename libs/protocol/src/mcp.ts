/** x402's MCP transport: the payment and its settlement travel in `_meta` under these keys. */
export const MCP_PAYMENT_META = 'x402/payment';
export const MCP_PAYMENT_RESPONSE_META = 'x402/payment-response';

/** An `exact` payment requirement, as x402 v2 states it. */
export interface ExactRequirements {
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

/** @modelcontextprotocol/sdk's CallToolResult, structurally (any SDK 1.x version fits). */
export interface ToolResult {
  content: Array<{ type: string; [key: string]: unknown }>;
  isError?: boolean;
  structuredContent?: Record<string, unknown>;
  _meta?: Record<string, unknown>;
  [key: string]: unknown;
}

const isPaymentRequired = (value: unknown): value is McpPaymentRequired =>
  typeof value === 'object' &&
  value !== null &&
  (value as { x402Version?: unknown }).x402Version === 2 &&
  Array.isArray((value as { accepts?: unknown }).accepts);

/** The PaymentRequired itself, or inside an `{"x402/error": {data}}` wrapper (some servers send one). */
function unwrapPaymentRequired(value: unknown): McpPaymentRequired | undefined {
  if (isPaymentRequired(value)) return value;
  const data = (value as { 'x402/error'?: { data?: unknown } } | null | undefined)?.['x402/error']?.data;
  return isPaymentRequired(data) ? data : undefined;
}

/** An `isError` result asking for a payment, again as JSON text for clients without structuredContent. */
export function paymentRequiredResult(
  required: McpPaymentRequired,
  extra: Record<string, unknown> = {},
): ToolResult {
  const structuredContent = { ...required, ...extra };
  return {
    isError: true,
    structuredContent,
    content: [{ type: 'text', text: JSON.stringify(structuredContent) }],
  };
}

/** A result's PaymentRequired, in x402's order: `structuredContent`, then the JSON of `content[0].text`. */
export function paymentRequiredOf(result: unknown): McpPaymentRequired | undefined {
  const r = result as { isError?: boolean; structuredContent?: unknown; content?: Array<{ text?: unknown }> };
  if (r?.isError !== true) return undefined;
  const structured = unwrapPaymentRequired(r.structuredContent);
  if (structured) return structured;
  const text = r.content?.[0]?.text;
  if (typeof text !== 'string') return undefined;
  try {
    return unwrapPaymentRequired(JSON.parse(text));
  } catch {
    return undefined;
  }
}
