import {
  createX402Seller,
  PaygateUnavailableError,
  type X402SellerConfig,
} from '@paygate/gateway-middleware';
import {
  MCP_PAYMENT_META,
  MCP_PAYMENT_RESPONSE_META,
  paymentRequiredResult,
  type ToolResult,
} from '@paygate/protocol';

export { MCP_PAYMENT_META, MCP_PAYMENT_RESPONSE_META, paymentRequiredResult, type ToolResult };

/** The `extra` every MCP SDK tool callback gets last: the request's `_meta` is where a payment travels. */
interface ToolExtra {
  _meta?: Record<string, unknown>;
}

export interface PaidToolOptions {
  /** Decimal USDC per call ("0.05"); at least 0.01 (Paygate's relaying minimum). */
  price: string;
  /** The tool's name, for the resource the buyer signs for (`mcp://tool/<name>`). */
  tool: string;
  /** What the buyer pays for; shown in the payment requirements. */
  description?: string;
}

export type PaywallConfig = X402SellerConfig;

const UNAVAILABLE = 'Payment service unavailable: Paygate could not be reached; retry shortly';
const errorResult = (message: string): ToolResult => ({
  isError: true,
  content: [{ type: 'text', text: message }],
});

/**
 * Prices the tools of your own MCP server per call with x402, settled into Paygate's escrow (see the README):
 * `server.tool('forecast', …, paid({ tool: 'forecast', price: '0.05' }, handler))`. A tool that throws after
 * settlement still cost the buyer the price, as an HTTP call would.
 */
export function createPaywall(config: PaywallConfig) {
  const seller = createX402Seller(config);
  // Typed as the tool's own result (the SDK's CallToolResult), which a payment-required result also is.
  return function paid<Args extends unknown[], Result extends ToolResult>(
    options: PaidToolOptions,
    handler: (...args: Args) => Result | Promise<Result>,
  ): (...args: Args) => Promise<Result> {
    const sale = {
      price: options.price,
      resourceUrl: `mcp://tool/${options.tool}`,
      description: options.description ?? `${options.tool}: ${options.price} USDC per call`,
    };
    return async (...args: Args): Promise<Result> => (await charge(args)) as Result;
    async function charge(args: Args): Promise<ToolResult> {
      const extra = args[args.length - 1] as ToolExtra | undefined;
      const payment = extra?._meta?.[MCP_PAYMENT_META];
      try {
        if (payment === undefined) {
          const required = await seller.paymentRequired(sale);
          return required ? paymentRequiredResult(required) : errorResult(UNAVAILABLE);
        }
        const settled = await seller.settle(payment, sale);
        if (!settled.ok) {
          const required = await seller.paymentRequired(sale, settled.reason);
          if (!required || settled.status !== 402) {
            return errorResult(`Payment not settled (${settled.reason}): ${settled.message}`);
          }
          return paymentRequiredResult(required, {
            [MCP_PAYMENT_RESPONSE_META]: settled.response ?? {
              success: false,
              errorReason: settled.reason,
              transaction: '',
              network: required.accepts[0]?.network ?? '',
            },
          });
        }
        const result = await handler(...args);
        return { ...result, _meta: { ...result._meta, [MCP_PAYMENT_RESPONSE_META]: settled.response } };
      } catch (error) {
        if (error instanceof PaygateUnavailableError) return errorResult(UNAVAILABLE);
        throw error;
      }
    }
  };
}
