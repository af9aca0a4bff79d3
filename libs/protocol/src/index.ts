export {
  type ExactRequirements,
  MCP_PAYMENT_META,
  MCP_PAYMENT_RESPONSE_META,
  type McpPaymentRequired,
  paymentRequiredOf,
  paymentRequiredResult,
  type ToolResult,
} from './mcp';
