/**
 * x402's MCP transport: the payment travels in the tool call's `_meta["x402/payment"]`, the settlement in the
 * result's `_meta["x402/payment-response"]`, and a call that must be paid gets a tool result with `isError`, the
 * PaymentRequired in `structuredContent` and the same object as JSON in `content[0].text` (x402's MCP transport:
 * a client that cannot read structured content finds `accepts` in the text).
 */
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

/** A tool result, as @modelcontextprotocol/sdk's CallToolResult (kept structural: any SDK 1.x version fits). */
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

/** The tool result that asks for a payment (`extra`: more fields beside the requirements, e.g. a failed settlement). */
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

/**
 * The PaymentRequired a tool result carries, in x402's order: `structuredContent`, then the JSON of
 * `content[0].text`; also inside an `{"x402/error": {data}}` wrapper, which some other servers send.
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
